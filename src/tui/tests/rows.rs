//! Rows formatted on demand (the Nodes and Pending views) against rows built all at
//! once: over thousands of rows, every filter and sort picks the same rows in the same
//! order, the screen at the top, the bottom and after a sort is the same, and the
//! selection follows its NodeClaim across new snapshots.

use std::sync::Arc;

use crate::bench::render as render_bench;
use crate::control::controller::Snapshot;
use crate::tui::app::App;
use crate::tui::frame;
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::views::{self, View};
use crate::tui::widgets::table::{Filter, TableView};

/// The benchmark cluster (every node explained by a full pass), with every tenth pod
/// waiting so the Pending view has rows too.
fn cluster() -> Arc<Snapshot> {
    render_bench::with_pending(&render_bench::snapshot(1500, 15000))
}

fn eager(view: View, s: &Snapshot, app: &App) -> TableView {
    let rows = match view {
        View::Nodes => views::nodes::rows(s, app.now()),
        _ => views::pending::rows(s, app.now()),
    };
    let mut t = TableView::default();
    t.set_rows(rows);
    t
}

fn ids(t: &TableView) -> Vec<String> {
    t.visible_ids().map(str::to_string).collect()
}

fn table(app: &mut App, view: View) -> &mut TableView {
    app.tables.get_mut(view).unwrap()
}

#[test]
fn filters_and_sorts_over_on_demand_rows_pick_what_formatting_every_row_picks() {
    let s = cluster();
    for view in [View::Nodes, View::Pending] {
        let mut app = frame::app(Arc::clone(&s), Theme::default(), false);
        app.show(view);
        let mut plain = eager(view, &s, &app);
        assert!(plain.total() > 1000, "{view:?}: {}", plain.total());
        let columns = views::columns(view).len();
        let filters = ["", "spot", "!od", "^ip-", "draining|zone-b|default/", "1/"];
        for filter in filters {
            let f = (!filter.is_empty()).then(|| Filter::parse(filter).unwrap());
            table(&mut app, view).set_filter(f.clone());
            plain.set_filter(f);
            // Unsorted, then by every column up and down, then unsorted again.
            for _ in 0..=columns * 2 {
                let lazy = table(&mut app, view);
                assert_eq!(lazy.sort(), plain.sort());
                assert_eq!(
                    ids(lazy),
                    ids(&plain),
                    "{view:?} /{filter} {:?}",
                    plain.sort()
                );
                // Reversed, then back.
                for _ in 0..2 {
                    lazy.reverse_sort();
                    plain.reverse_sort();
                    assert_eq!(
                        ids(lazy),
                        ids(&plain),
                        "{view:?} /{filter} {:?}",
                        plain.sort()
                    );
                }
                lazy.cycle_sort(columns);
                plain.cycle_sort(columns);
            }
        }
        // Formatted at last, every row reads as the eager build has it.
        let lazy = table(&mut app, view);
        assert!(lazy.visible().eq(plain.visible()), "{view:?}");
    }
}

#[test]
fn the_screen_at_the_top_the_bottom_and_after_a_sort_is_the_eagerly_built_one() {
    let s = cluster();
    for view in [View::Nodes, View::Pending] {
        let mut app = frame::app(Arc::clone(&s), Theme::default(), false);
        app.show(view);
        let steps: [&[Action]; 5] = [
            &[],
            &[Action::Bottom],
            &[Action::Sort, Action::Sort, Action::Bottom],
            &[Action::SortReverse, Action::PageUp, Action::Up],
            &[
                Action::Sort,
                Action::Top,
                Action::PageDown,
                Action::PageDown,
            ],
        ];
        for actions in steps {
            for a in actions {
                app.act(*a);
            }
            let lazy = frame::text(&frame::draw(&mut app, 160, 45));
            // The same table (sort, selection, scroll) over rows built all at once.
            let saved = table(&mut app, view).clone();
            let mut plain = saved.clone();
            plain.set_rows(eager(view, &s, &app).visible().cloned().collect());
            *table(&mut app, view) = plain;
            let built = frame::text(&frame::draw(&mut app, 160, 45));
            assert_eq!(lazy, built, "{view:?} after {actions:?}");
            *table(&mut app, view) = saved;
        }
    }
}

#[test]
fn the_selection_follows_its_nodeclaim_across_snapshots_of_on_demand_rows() {
    let s = cluster();
    let mut app = frame::app(Arc::clone(&s), Theme::default(), false);
    app.show(View::Nodes);
    app.act(Action::Sort);
    app.act(Action::Sort);
    app.act(Action::Bottom);
    for _ in 0..7 {
        app.act(Action::Up);
    }
    let chosen = app.tables.nodes.selected_id().unwrap().to_string();
    let mut next = Snapshot::clone(&s);
    next.changes += 1;
    next.generation += 1;
    app.on_snapshot(Arc::new(next));
    assert_eq!(app.tables.nodes.selected_id(), Some(chosen.as_str()));
    assert_eq!(app.tables.nodes.selected_row().unwrap().id, chosen);
    let text = frame::text(&frame::draw(&mut app, 160, 45));
    let name = &s.state.node(&chosen).unwrap().name;
    assert!(text.contains(name.as_str()), "{text}");
}
