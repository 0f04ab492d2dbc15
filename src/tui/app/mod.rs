//! The console's state and how it changes: which view is shown, where the cursor is,
//! what the operator is typing, and what a key does. Pure state: keys and snapshots go
//! in, `Effect`s come out, and the event loop (or a test) carries the effects out. Every
//! dangerous action passes through `App::dangerous`, the one gate that checks read-only
//! mode and asks for confirmation (operator.rs); the filter box, `:` commands,
//! confirmations and the details popup take keys in prompts.rs.

mod line_input;
mod mouse;
mod operator;
mod prompts;

pub use mouse::{Regions, WHEEL_ROWS};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::control::controller::Snapshot;
use crate::engine::approval::Scope;
use crate::tui::console::{Reply, Request, Source};
use crate::tui::keymap::{Action, Keymap};
use crate::tui::logpane::LogPane;
use crate::tui::theme::Theme;
use crate::tui::views::{self, Details, View};
use crate::tui::widgets::table::TableView;

pub use line_input::{Edit, LineInput};

/// What the event loop must do after a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Send to the controller; the reply comes back through `App::on_reply`.
    Request(Request),
    Quit,
}

/// In a wide table, left/right (and h/l) scroll sideways instead of switching views.
fn sideways(key: &KeyEvent) -> Option<i64> {
    use crossterm::event::{KeyCode, KeyModifiers};
    if key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    {
        return None;
    }
    match key.code {
        KeyCode::Left | KeyCode::Char('h') => Some(-1),
        KeyCode::Right | KeyCode::Char('l') => Some(1),
        _ => None,
    }
}

/// How long a status message stays.
const STATUS_FOR: Duration = Duration::from_secs(8);

/// How far the console's clock may run past the backend's promised next round
/// ([`Snapshot::next_round`]) when no snapshot comes: a few seconds, then it stops rather
/// than show a time the backend has not reached.
const AHEAD: TimeDelta = TimeDelta::seconds(3);

/// Wall time without a snapshot (past the promised round) after which the header says
/// the data is stale.
const STALE_AFTER: Duration = Duration::from_secs(5);

/// A line in the footer: what just happened.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub text: String,
    pub error: bool,
    pub since: Instant,
}

/// A dangerous request waiting for the operator's yes or no.
#[derive(Clone, Debug, PartialEq)]
pub struct Confirm {
    pub prompt: String,
    pub request: Request,
    /// For reject and pause: the operator's reason, typed in the popup (optional; it
    /// goes into the journal and the Event). While it is there, enter confirms and esc
    /// cancels, and every other key is text, so a reason can start with "n" or "y".
    pub reason: Option<LineInput>,
}

/// What keys go to.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    Normal,
    /// Typing a filter; the previous one is restored on esc.
    Filter {
        input: LineInput,
        previous: Option<String>,
    },
    Command {
        input: LineInput,
    },
    Confirm(Confirm),
    Details(Details),
}

/// The console's settings (config file and flags).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Dangerous actions that ask "y/n" first. approve-all always does.
    pub confirm: BTreeSet<Action>,
    /// Searched for `:theme NAME` before the built-in themes.
    pub themes_dir: Option<PathBuf>,
    /// Strip colours (NO_COLOR).
    pub no_color: bool,
    /// The terminal shows 24-bit colour; otherwise themes are drawn in the 256-colour
    /// palette.
    pub truecolor: bool,
}

/// The actions that ask first unless the config says otherwise: the ones that are hard
/// to take back with one more key (approve-all always asks, whatever the config says).
pub const DEFAULT_CONFIRM: &[Action] = &[Action::ApproveAll, Action::Reject, Action::Pause];

impl Settings {
    /// A theme as this terminal can show it: no colour under NO_COLOR, the 256-colour
    /// palette without truecolor.
    pub fn fit(&self, theme: Theme) -> Theme {
        if self.no_color {
            theme.without_colour()
        } else if !self.truecolor {
            theme.in_256_colours()
        } else {
            theme
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            confirm: DEFAULT_CONFIRM.iter().copied().collect(),
            themes_dir: None,
            no_color: false,
            truecolor: true,
        }
    }
}

/// One table per list view.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    pub nodepools: TableView,
    pub nodes: TableView,
    pub pending: TableView,
    pub decisions: TableView,
    pub events: TableView,
    pub help: TableView,
}

impl Tables {
    pub fn get_mut(&mut self, view: View) -> Option<&mut TableView> {
        Some(match view {
            View::NodePools => &mut self.nodepools,
            View::Nodes => &mut self.nodes,
            View::Pending => &mut self.pending,
            View::Disruption => &mut self.decisions,
            View::Events => &mut self.events,
            View::Help => &mut self.help,
            View::Overview => return None,
        })
    }

    pub fn get(&self, view: View) -> Option<&TableView> {
        Some(match view {
            View::NodePools => &self.nodepools,
            View::Nodes => &self.nodes,
            View::Pending => &self.pending,
            View::Disruption => &self.decisions,
            View::Events => &self.events,
            View::Help => &self.help,
            View::Overview => return None,
        })
    }
}

/// The console.
pub struct App {
    pub snapshot: Arc<Snapshot>,
    pub view: View,
    /// The view help was opened from: `?` or esc in help goes back there.
    before_help: View,
    pub tables: Tables,
    /// Views whose rows predate the snapshot.
    stale: BTreeSet<View>,
    pub overview: Option<views::overview::Data>,
    /// The Disruption view's Blocked pane, built once per snapshot (it walks every
    /// node's outcome: 28 ms a frame at 5,000 nodes when built per frame).
    pub blocked: Option<Arc<Vec<(String, String)>>>,
    pub mode: Mode,
    pub status: Option<Status>,
    pub theme: Theme,
    pub keymap: Keymap,
    pub source: Source,
    pub settings: Settings,
    pub log: LogPane,
    pub quit: bool,
    dirty: bool,
    /// Requests sent and not answered yet.
    pub in_flight: usize,
    /// Header and tab figures, computed once per snapshot.
    pub figures: Figures,
    /// Where the last frame drew what the mouse can click.
    pub regions: Regions,
    /// Wall time the current snapshot arrived, and the latest wall time seen (a tick or a
    /// snapshot): the console's clock runs from the first to the second.
    received: Instant,
    wall: Instant,
    /// What the last tick showed of time (the clock's second, the staleness badge): a
    /// tick redraws only when that changes.
    face: (i64, Option<u64>),
}

/// What the header and tabs show, from one snapshot. The cost and the node count are
/// over the same nodes: every node, deleting ones too (they still run and bill), the
/// count split into live and deleting ("12 nodes (+1 deleting)").
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub nodes: usize,
    pub deleting: usize,
    pub cost: f64,
    pub pending_pods: usize,
}

impl Figures {
    pub fn of(s: &Snapshot) -> Figures {
        let deleting = s.state.nodes.iter().filter(|n| n.deleting).count();
        Figures {
            nodes: s.state.nodes.len() - deleting,
            deleting,
            cost: s.state.nodes.iter().map(|n| n.price).sum(),
            pending_pods: s
                .state
                .pods
                .iter()
                .filter(|p| views::pending::is_pending(p))
                .count(),
        }
    }
}

impl App {
    pub fn new(
        snapshot: Arc<Snapshot>,
        source: Source,
        theme: Theme,
        keymap: Keymap,
        settings: Settings,
        log: LogPane,
    ) -> App {
        let theme = settings.fit(theme);
        let mut app = App {
            snapshot,
            view: View::Overview,
            before_help: View::Overview,
            tables: Tables::default(),
            stale: View::ALL.iter().copied().collect(),
            overview: None,
            blocked: None,
            mode: Mode::Normal,
            status: None,
            theme,
            keymap,
            source,
            settings,
            log,
            quit: false,
            dirty: true,
            in_flight: 0,
            figures: Figures::default(),
            regions: Regions::default(),
            received: Instant::now(),
            wall: Instant::now(),
            face: (0, None),
        };
        app.face = app.face();
        app.figures = Figures::of(&app.snapshot);
        app.refresh();
        app
    }

    /// The backend's time now, as well as the console can tell: the snapshot's time plus
    /// the wall time since it arrived at the backend's clock rate, but never more than
    /// [`AHEAD`] past the round the backend promised (so a stalled backend stops the
    /// clock instead of the clock making up time).
    pub fn now(&self) -> DateTime<Utc> {
        let s = &self.snapshot;
        self.estimate().min(s.next_round.max(s.at) + AHEAD)
    }

    /// The snapshot's time moved on by wall time at the clock rate, uncapped.
    fn estimate(&self) -> DateTime<Utc> {
        let wall = self
            .wall
            .saturating_duration_since(self.received)
            .as_secs_f64();
        let rate = if self.source.rate.is_finite() {
            self.source.rate.clamp(0.0, 1e6)
        } else {
            0.0
        };
        // Bounded so that a console left open for years cannot overflow the date.
        let ms = (wall * rate * 1000.0).min(1e13) as i64;
        self.snapshot.at + TimeDelta::milliseconds(ms)
    }

    /// How long (wall time) no snapshot has come when one was due: the backend promised
    /// a round by [`Snapshot::next_round`] and has sent nothing for [`STALE_AFTER`] and
    /// past that round. None while the data is fresh or the cluster is merely quiet.
    pub fn stale_for(&self) -> Option<Duration> {
        let silent = self.wall.saturating_duration_since(self.received);
        let overdue = self.estimate() > self.snapshot.next_round.max(self.snapshot.at) + AHEAD;
        (silent > STALE_AFTER && overdue).then_some(silent)
    }

    fn face(&self) -> (i64, Option<u64>) {
        (
            self.now().timestamp(),
            self.stale_for().map(|d| d.as_secs()),
        )
    }

    /// Takes a new snapshot: the visible view's rows are rebuilt now, the others when
    /// they are next shown.
    pub fn on_snapshot(&mut self, snapshot: Arc<Snapshot>) {
        self.on_snapshot_at(snapshot, Instant::now());
    }

    /// [`App::on_snapshot`] for a snapshot that arrived at `wall`. A heartbeat (nothing
    /// changed but the time) only moves the clock.
    pub fn on_snapshot_at(&mut self, snapshot: Arc<Snapshot>, wall: Instant) {
        self.received = wall;
        self.wall = wall;
        let heartbeat = Arc::ptr_eq(&self.snapshot.state, &snapshot.state)
            && self.snapshot.changes == snapshot.changes
            && self.snapshot.started == snapshot.started;
        crate::tui::retire::retire(std::mem::replace(&mut self.snapshot, snapshot));
        if heartbeat {
            self.tick_face();
            return;
        }
        self.figures = Figures::of(&self.snapshot);
        // An open details popup follows its object; one that went away says so.
        let now = self.now();
        if let Mode::Details(d) = &mut self.mode
            && let Some((view, id)) = d.row.clone()
        {
            match views::details(view, &self.snapshot, &id, now) {
                Some(mut fresh) => {
                    fresh.scroll = d.scroll.min(fresh.lines.len().saturating_sub(1) as u16);
                    fresh.row = Some((view, id));
                    *d = fresh;
                }
                None if !d.title.ends_with("(gone)") => d.title.push_str(" (gone)"),
                None => {}
            }
        }
        self.stale = View::ALL.iter().copied().collect();
        self.overview = None;
        self.blocked = None;
        self.refresh();
        self.face = self.face();
        self.dirty = true;
    }

    /// Time moved: when what the screen shows of it changed (the clock's second, the
    /// staleness badge), the visible view's time-dependent rows (ages, countdowns) are
    /// rebuilt and a frame is due; otherwise nothing happens.
    fn tick_face(&mut self) {
        let face = self.face();
        if face == self.face {
            return;
        }
        let before = std::mem::replace(&mut self.face, face);
        self.dirty = true;
        if face.0 != before.0 && views::moves_with_time(self.view) {
            self.stale.insert(self.view);
            self.refresh();
        }
    }

    /// The controller answered a request.
    pub fn on_reply(&mut self, reply: Reply) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match reply {
            Ok(text) => self.say(text),
            Err(text) => self.warn(text),
        }
    }

    /// The answer to a request that reports (a what-if): its text opens in the details
    /// popup, the first line as the title; a refusal goes to the status line.
    pub fn on_report(&mut self, reply: Reply) {
        self.in_flight = self.in_flight.saturating_sub(1);
        match reply {
            Ok(text) => {
                let mut lines = text.lines();
                let title = lines.next().unwrap_or("report").to_string();
                let mut b = views::details::Builder::default();
                for l in lines {
                    let tone = if l.starts_with("── ") {
                        crate::tui::widgets::table::Tone::Accent
                    } else {
                        crate::tui::widgets::table::Tone::Normal
                    };
                    b.line(tone, l);
                }
                self.status = None;
                self.mode = Mode::Details(b.finish(title));
                self.dirty = true;
            }
            Err(text) => self.warn(text),
        }
    }

    /// Once a second: moves the clock (the header, ages and countdowns), shows the data
    /// as stale when snapshots stopped, expires the status line. True when that changed
    /// what is shown.
    pub fn on_tick(&mut self, now: Instant) -> bool {
        self.wall = self.wall.max(now);
        self.tick_face();
        if self
            .status
            .as_ref()
            .is_some_and(|s| now.duration_since(s.since) >= STATUS_FOR)
        {
            self.status = None;
            self.dirty = true;
        }
        if self.view == View::Events && self.log.changed() {
            self.dirty = true;
        }
        self.dirty
    }

    /// Something changed since the last draw.
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    pub fn drawn(&mut self) {
        self.dirty = false;
    }

    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Shows a message in the footer (and logs it).
    pub fn say(&mut self, text: String) {
        tracing::info!("{text}");
        self.show_status(text, false);
    }

    /// Shows an error in the footer (and logs it).
    pub fn warn(&mut self, text: String) {
        tracing::warn!("{text}");
        self.show_status(text, true);
    }

    /// Reports several problems at once (a config file's mistakes at start): each goes
    /// to the log pane, and the footer shows the first and how many more there are,
    /// rather than only the last one.
    pub fn warn_all(&mut self, problems: &[String]) {
        for p in problems {
            tracing::warn!("{p}");
        }
        match problems {
            [] => {}
            [one] => self.show_status(one.clone(), true),
            [first, rest @ ..] => self.show_status(
                format!("{first} (+{} more in the Events view's log)", rest.len()),
                true,
            ),
        }
    }

    fn show_status(&mut self, text: String, error: bool) {
        self.status = Some(Status {
            text,
            error,
            since: Instant::now(),
        });
        self.dirty = true;
    }

    /// Rebuilds the rows of the view shown if they are stale.
    fn refresh(&mut self) {
        let view = self.view;
        if view == View::Overview {
            if self.overview.is_none() {
                self.overview = Some(views::overview::Data::build(&self.snapshot));
            }
            return;
        }
        if !self.stale.remove(&view) {
            return;
        }
        let rows = views::rows(view, &self.snapshot, &self.keymap, self.now());
        if let Some(t) = self.tables.get_mut(view) {
            match rows {
                views::Rows::Built(rows) => t.set_rows(rows),
                views::Rows::OnDemand(source) => t.set_source(source),
            }
        }
    }

    pub fn show(&mut self, view: View) {
        if view == View::Help && self.view != View::Help {
            self.before_help = self.view;
        }
        self.view = view;
        self.refresh();
        self.dirty = true;
    }

    /// Handles one key. Returns what the event loop must do. ctrl-c quits from
    /// anywhere, whatever the keymap says: the one key that cannot be unbound.
    pub fn on_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        self.dirty = true;
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return vec![Effect::Quit];
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Normal => self.normal_key(key),
            Mode::Filter { input, previous } => self.filter_key(key, input, previous),
            Mode::Command { input } => self.command_key(key, input),
            Mode::Confirm(c) => self.confirm_key(key, c),
            Mode::Details(d) => self.details_key(key, d),
        }
    }

    fn normal_key(&mut self, key: KeyEvent) -> Vec<Effect> {
        if let Some(delta) = sideways(&key)
            && let Some(t) = self.tables.get_mut(self.view)
            && t.is_wide()
        {
            t.scroll_sideways(delta);
            return Vec::new();
        }
        let Some(action) = self.keymap.action(&key) else {
            return Vec::new();
        };
        self.act(action)
    }

    /// Carries out an action (from a key, or a `:` command).
    pub fn act(&mut self, action: Action) -> Vec<Effect> {
        let view = self.view;
        let n = View::ALL.len();
        let idx = View::ALL.iter().position(|v| *v == view).unwrap_or(0);
        match action {
            Action::Quit => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            Action::NextView => self.show(View::ALL[(idx + 1) % n]),
            Action::PrevView => self.show(View::ALL[(idx + n - 1) % n]),
            Action::ViewOverview => self.show(View::Overview),
            Action::ViewNodePools => self.show(View::NodePools),
            Action::ViewNodes => self.show(View::Nodes),
            Action::ViewPending => self.show(View::Pending),
            Action::ViewDisruption => self.show(View::Disruption),
            Action::ViewEvents => self.show(View::Events),
            Action::ViewHelp => self.show(View::Help),
            // `?` toggles: in help it goes back to where help was opened.
            Action::Help if view == View::Help => self.show(self.before_help),
            Action::Help => self.show(View::Help),
            Action::Down | Action::Up | Action::PageDown | Action::PageUp => {
                if let Some(t) = self.tables.get_mut(view) {
                    let step = match action {
                        Action::Down => 1,
                        Action::Up => -1,
                        Action::PageDown => t.page(),
                        _ => -t.page(),
                    };
                    t.move_by(step);
                }
            }
            Action::Top => {
                if let Some(t) = self.tables.get_mut(view) {
                    t.top();
                }
            }
            Action::Bottom => {
                if let Some(t) = self.tables.get_mut(view) {
                    t.bottom();
                }
            }
            Action::Filter => {
                if let Some(t) = self.tables.get(view) {
                    let previous = t.filter().map(|f| f.text.clone());
                    self.mode = Mode::Filter {
                        input: LineInput::new(previous.as_deref().unwrap_or_default()),
                        previous,
                    };
                } else {
                    self.warn(format!("the {} view has no rows to filter", view.title()));
                }
            }
            Action::Command => {
                self.mode = Mode::Command {
                    input: LineInput::default(),
                }
            }
            Action::Sort | Action::SortReverse => {
                let columns = views::columns(view).len();
                if let Some(t) = self.tables.get_mut(view) {
                    if action == Action::Sort {
                        t.cycle_sort(columns);
                    } else {
                        t.reverse_sort();
                    }
                }
            }
            Action::Wide => match self.tables.get_mut(view) {
                Some(t) => {
                    let on = t.toggle_wide();
                    self.say(if on {
                        "wide: every column at full width; left/right or h/l scroll sideways".into()
                    } else {
                        "wide off: columns fit the window".into()
                    });
                }
                None => self.warn(format!("the {} view has no table to widen", view.title())),
            },
            Action::Details => {
                let id = self
                    .tables
                    .get(view)
                    .and_then(|t| t.selected_id())
                    .map(str::to_string);
                match id.and_then(|id| {
                    let mut d = views::details(view, &self.snapshot, &id, self.now())?;
                    d.row = Some((view, id));
                    Some(d)
                }) {
                    Some(d) => self.mode = Mode::Details(d),
                    None => self.warn("nothing selected".into()),
                }
            }
            Action::Back => {
                if let Some(t) = self.tables.get_mut(view)
                    && t.filter().is_some()
                {
                    t.set_filter(None);
                    self.say("filter cleared".into());
                } else if view == View::Help {
                    self.show(self.before_help);
                }
            }
            Action::Approve => return self.approve_selected(),
            Action::ApproveAll => return self.approve_visible(),
            Action::Reject => return self.reject_selected(),
            Action::Pause => {
                let paused = self.snapshot.pauses.contains(&Scope::All);
                return self.toggle_pause(Scope::All, paused, Action::Pause);
            }
            Action::PausePool => match self.selected_pool() {
                Some(pool) => {
                    let scope = Scope::NodePool(pool);
                    let paused = self.snapshot.pauses.contains(&scope);
                    return self.toggle_pause(scope, paused, Action::PausePool);
                }
                None => self.warn(
                    "select a NodePool first (in the NodePools, Nodes or Disruption view)".into(),
                ),
            },
        }
        Vec::new()
    }

    /// The actions the footer offers here, most useful first.
    pub fn hints(&self) -> Vec<Action> {
        match &self.mode {
            Mode::Normal => {}
            _ => return Vec::new(),
        }
        let mut v = match self.view {
            View::Disruption => vec![
                Action::Approve,
                Action::Reject,
                Action::ApproveAll,
                Action::PausePool,
                Action::Details,
            ],
            View::Nodes => vec![
                Action::Approve,
                Action::Reject,
                Action::PausePool,
                Action::Details,
            ],
            View::NodePools => vec![Action::PausePool, Action::Details],
            View::Pending | View::Events => vec![Action::Details],
            View::Overview | View::Help => vec![],
        };
        v.push(Action::Pause);
        if self.tables.get(self.view).is_some() {
            v.extend([Action::Filter, Action::Sort]);
        }
        v.extend([
            Action::Command,
            Action::NextView,
            Action::Help,
            Action::Quit,
        ]);
        if self.source.read_only {
            v.retain(|a| !a.dangerous());
        }
        v
    }
}
