//! Keys while the operator is typing or answering: the filter box, `:` commands, the
//! confirmation (y/n, or a reason and enter) and the details popup. Every text field
//! edits through `LineInput`, and a paste lands there as text (`App::on_paste`).

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent};

use super::{App, Confirm, Edit, Effect, LineInput, Mode, Status};
use crate::engine::approval::Scope;
use crate::tui::console::Request;
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::views::{Details, View};
use crate::tui::widgets::table::Filter;

impl App {
    /// A paste (bracketed paste: the terminal marks it, so it never arrives as keys):
    /// text for the prompt it lands in, with line breaks turned into spaces so it can
    /// never submit; outside a prompt it is dropped with a message.
    pub fn on_paste(&mut self, text: &str) {
        self.dirty = true;
        match &mut self.mode {
            Mode::Filter { input, .. } => {
                input.insert(text);
                self.filter_changed();
            }
            Mode::Command { input } => input.insert(text),
            Mode::Confirm(Confirm {
                reason: Some(input),
                ..
            }) => input.insert(text),
            _ => self.warn(
                "paste ignored: pasted text only goes into a prompt (/ filter, : command, a reason)"
                    .into(),
            ),
        }
    }

    pub(super) fn filter_key(
        &mut self,
        key: KeyEvent,
        mut input: LineInput,
        previous: Option<String>,
    ) -> Vec<Effect> {
        let view = self.view;
        match (key.code, input.key(&key)) {
            (KeyCode::Esc, _) => {
                let restored = previous.as_deref().and_then(|p| Filter::parse(p).ok());
                if let Some(t) = self.tables.get_mut(view) {
                    t.set_filter(restored);
                }
                return Vec::new();
            }
            (KeyCode::Enter, _) => return Vec::new(),
            (_, Edit::Changed) => {
                self.mode = Mode::Filter { input, previous };
                self.filter_changed();
                return Vec::new();
            }
            _ => {}
        }
        self.mode = Mode::Filter { input, previous };
        Vec::new()
    }

    /// Live: every change narrows the rows; an unfinished regex keeps the last good one
    /// and says why.
    fn filter_changed(&mut self) {
        let view = self.view;
        let Mode::Filter { input, .. } = &self.mode else {
            return;
        };
        let input = input.text();
        let parsed = if input.is_empty() || input == "!" {
            Ok(None)
        } else {
            Filter::parse(&input).map(Some)
        };
        match parsed {
            Ok(f) => {
                if let Some(t) = self.tables.get_mut(view) {
                    t.set_filter(f);
                }
                self.status = None;
            }
            Err(e) => {
                self.status = Some(Status {
                    text: e,
                    error: true,
                    since: Instant::now(),
                })
            }
        }
    }

    pub(super) fn command_key(&mut self, key: KeyEvent, mut input: LineInput) -> Vec<Effect> {
        match (key.code, input.key(&key)) {
            (KeyCode::Esc, _) => Vec::new(),
            (KeyCode::Enter, _) => self.run_command(&input.text()),
            _ => {
                self.mode = Mode::Command { input };
                Vec::new()
            }
        }
    }

    /// `:` commands.
    pub fn run_command(&mut self, line: &str) -> Vec<Effect> {
        let mut words = line.split_whitespace();
        let Some(cmd) = words.next() else {
            return Vec::new();
        };
        let arg = words.next().map(str::to_string);
        match cmd {
            "q" | "q!" | "quit" => self.act(Action::Quit),
            "nodepool" | "nodepools" | "np" => {
                self.show(View::NodePools);
                if let Some(name) = arg
                    && !self.tables.nodepools.select_id(&name)
                {
                    self.warn(format!("no NodePool {name:?}"));
                }
                Vec::new()
            }
            "nodes" | "node" | "nodeclaims" | "nc" => self.act(Action::ViewNodes),
            "pods" | "pending" => self.act(Action::ViewPending),
            "disruption" | "decisions" => self.act(Action::ViewDisruption),
            "events" | "log" => self.act(Action::ViewEvents),
            "help" => self.act(Action::ViewHelp),
            "overview" => self.act(Action::ViewOverview),
            "pause" | "resume" => {
                let pause = cmd == "pause";
                let (scope, action) = match arg {
                    None => (Scope::All, Action::Pause),
                    Some(a) => match Scope::parse(&a) {
                        Ok(Scope::NodePool(p))
                            if !self.snapshot.state.nodepools.contains_key(&p) =>
                        {
                            self.warn(format!("no NodePool {p:?}"));
                            return Vec::new();
                        }
                        Ok(s @ Scope::All) => (s, Action::Pause),
                        Ok(s) => (s, Action::PausePool),
                        Err(e) => {
                            self.warn(e);
                            return Vec::new();
                        }
                    },
                };
                self.toggle_pause(scope, !pause, action)
            }
            "theme" => {
                match arg {
                    None => {
                        let names = Theme::available(self.settings.themes_dir.as_deref());
                        self.say(format!(
                            "themes: {} (now {})",
                            names.join(", "),
                            self.theme.name
                        ));
                    }
                    Some(name) => match Theme::load(&name, self.settings.themes_dir.as_deref()) {
                        Ok((t, problems)) => {
                            self.theme = self.settings.fit(t);
                            // Each mistake goes to the log; the footer shows the first
                            // and how many more there are.
                            for p in &problems {
                                tracing::warn!("{p}");
                            }
                            match problems.as_slice() {
                                [] => self.say(format!("theme {name}")),
                                [one] => self.warn(format!("theme {name}, except: {one}")),
                                [first, rest @ ..] => self.warn(format!(
                                    "theme {name}, except: {first} (+{} more in the Events view's log)",
                                    rest.len()
                                )),
                            }
                        }
                        Err(e) => self.warn(e.to_string()),
                    },
                }
                Vec::new()
            }
            "whatif" | "what-if" => {
                let rest = line.trim_start()[cmd.len()..].trim();
                match crate::control::whatif::Query::parse(rest) {
                    Ok(q) => {
                        if let Some(p) = Some(&q.edit.nodepool)
                            .filter(|p| !self.snapshot.state.nodepools.contains_key(*p))
                        {
                            self.warn(format!("no NodePool {p:?}"));
                            return Vec::new();
                        }
                        self.say(format!(
                            "what-if: playing the next {} twice, as it is and with the edit...",
                            crate::control::whatif::span(q.horizon.num_seconds() as f64)
                        ));
                        self.send(Request::WhatIf(q))
                    }
                    Err(e) => {
                        self.warn(format!(":{e}"));
                        Vec::new()
                    }
                }
            }
            other => {
                self.warn(format!(
                    ":{other}: unknown command (nodepool NAME, pause [POOL], resume [POOL], theme NAME, whatif [DURATION] POOL FIELD=VALUE, q)"
                ));
                Vec::new()
            }
        }
    }

    pub(super) fn confirm_key(&mut self, key: KeyEvent, mut c: Confirm) -> Vec<Effect> {
        if let Some(reason) = c.reason.as_mut() {
            return match (key.code, reason.key(&key)) {
                (KeyCode::Enter, _) => {
                    let typed = reason.text().trim().to_string();
                    let request = c.request.with_reason((!typed.is_empty()).then_some(typed));
                    self.send(request)
                }
                (KeyCode::Esc, _) => {
                    self.say("cancelled".into());
                    Vec::new()
                }
                _ => {
                    self.mode = Mode::Confirm(c);
                    Vec::new()
                }
            };
        }
        match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => self.send(c.request),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc | KeyCode::Char('q') => {
                self.say("cancelled".into());
                Vec::new()
            }
            _ => {
                self.mode = Mode::Confirm(c);
                Vec::new()
            }
        }
    }

    pub(super) fn details_key(&mut self, key: KeyEvent, mut d: Details) -> Vec<Effect> {
        let action = self.keymap.action(&key);
        match (key.code, action) {
            (KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q'), _) => return Vec::new(),
            (_, Some(Action::Down)) => d.scroll = d.scroll.saturating_add(1),
            (_, Some(Action::Up)) => d.scroll = d.scroll.saturating_sub(1),
            (_, Some(Action::PageDown)) => d.scroll = d.scroll.saturating_add(20),
            (_, Some(Action::PageUp)) => d.scroll = d.scroll.saturating_sub(20),
            (_, Some(Action::Top)) => d.scroll = 0,
            (_, Some(Action::Bottom)) => d.scroll = d.lines.len().saturating_sub(1) as u16,
            _ => {}
        }
        d.scroll = d.scroll.min(d.lines.len().saturating_sub(1) as u16);
        self.mode = Mode::Details(d);
        Vec::new()
    }
}
