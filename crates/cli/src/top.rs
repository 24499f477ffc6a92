//! `hark top URL`: a live run in the terminal, for a shell with no browser.
//! It reads the same API as the page (`docs/api.md`) once a second and
//! draws it with ratatui: progress, MPI share per rank, the top functions,
//! wait states and the MPI share over time.

use anyhow::{anyhow, Result};
use clap::Args;
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use hark_model::{Program, Run};
use ratatui::layout::{Constraint, Direction, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;
use std::time::{Duration, Instant};

pub const EXAMPLES: &str = "\
Examples:
  hark top http://127.0.0.1:40123/
  hark top --id run http://login1:8080/

Keys: q or Esc quits; p shows the next program.";

/// Options of `hark top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// The live view's address, as `hark run` prints it.
    #[arg(value_name = "URL")]
    pub url: String,

    /// Which run, when the server shows several (default: the only one, or
    /// the first still running).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
}

/// What the screen shows: the last answers and how they arrived.
#[derive(Default)]
struct View {
    id: String,
    state: String,
    run: Option<Run>,
    timeline: Option<serde_json::Value>,
    error: Option<String>,
    rate: f64,
    last: Option<(Instant, u64)>,
    program: usize,
}

/// Runs `hark top` until q, Esc or Ctrl-C.
pub fn top(args: &TopArgs) -> Result<i32> {
    let base = crate::query::base_url(&args.url);
    // Fail before taking over the terminal when there is nothing to show.
    let id = crate::query::pick_run(&base, args.id.as_deref())?;
    let mut view = View {
        id,
        ..View::default()
    };
    let mut terminal = ratatui::try_init().map_err(|e| anyhow!("cannot use the terminal: {e}"))?;
    let result = (|| -> Result<()> {
        let mut next = Instant::now();
        loop {
            if Instant::now() >= next {
                refresh(&base, &mut view);
                next = Instant::now() + Duration::from_secs(1);
            }
            terminal.draw(|f| draw(f, &view))?;
            if event::poll(next.saturating_duration_since(Instant::now()))? {
                if let Event::Key(k) = event::read()? {
                    if k.kind != KeyEventKind::Press {
                        continue;
                    }
                    match k.code {
                        KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                            return Ok(())
                        }
                        KeyCode::Char('p') => {
                            let n = view.run.as_ref().map_or(1, |r| r.programs.len().max(1));
                            view.program = (view.program + 1) % n;
                        }
                        _ => {}
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result.map(|()| 0)
}

fn refresh(base: &str, view: &mut View) {
    let get = |path: &str| hark_live::client::get(&format!("{base}{path}"));
    let answer = (|| -> Result<()> {
        let list: Vec<serde_json::Value> = serde_json::from_str(&get("api/runs")?)?;
        view.state = list
            .iter()
            .find(|r| r["id"] == view.id.as_str())
            .and_then(|r| r["state"].as_str())
            .unwrap_or("gone")
            .to_string();
        let run: Run = serde_json::from_str(&get(&format!("api/runs/{}/profile", view.id))?)?;
        view.timeline = Some(serde_json::from_str(&get(&format!(
            "api/runs/{}/timeline?bins=120",
            view.id
        ))?)?);
        let now = Instant::now();
        let events = run.accounting.events_received;
        if let Some((at, before)) = view.last {
            let dt = now.duration_since(at).as_secs_f64();
            if dt > 0.0 {
                view.rate = events.saturating_sub(before) as f64 / dt;
            }
        }
        view.last = Some((now, events));
        view.run = Some(run);
        Ok(())
    })();
    view.error = answer.err().map(|e| format!("not updating: {e}"));
}

fn draw(f: &mut Frame, view: &View) {
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(3),
            Constraint::Length(6),
            Constraint::Min(8),
        ])
        .split(f.area());
    let run = view.run.as_ref();
    let p = run.and_then(|r| {
        r.programs
            .get(view.program.min(r.programs.len().saturating_sub(1)))
    });
    let mut head = vec![
        Span::styled("hark top ", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(format!("run {} ({})  ", view.id, view.state)),
    ];
    if let (Some(run), Some(p)) = (run, p) {
        head.push(Span::raw(format!(
            "program {}  ranks {}  elapsed {}  events {}  {}/s",
            p.name,
            p.ranks,
            hark_outputs::units::duration(p.wall_ns as f64),
            run.accounting.events_received,
            count(view.rate)
        )));
    }
    let mut lines = vec![Line::from(head)];
    if let Some(e) = &view.error {
        lines.push(Line::styled(e.clone(), Style::default().fg(Color::Red)));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::BOTTOM)),
        rows[0],
    );
    let Some(p) = p else {
        return;
    };
    f.render_widget(over_time(view, rows[1].width), rows[1]);
    let cols = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(40), Constraint::Percentage(60)])
        .split(rows[2]);
    f.render_widget(shares(p), cols[0]);
    let right = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Min(6), Constraint::Length(10)])
        .split(cols[1]);
    f.render_widget(functions(p), right[0]);
    f.render_widget(waits(p), right[1]);
}

fn count(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e4 => format!("{:.1}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// The share of time in MPI over time, summed over ranks, as a sparkline
/// (percent per bin).
fn over_time(view: &View, width: u16) -> Sparkline<'static> {
    let mut data = Vec::new();
    if let Some(p) = view
        .timeline
        .as_ref()
        .and_then(|t| t["programs"].get(view.program))
    {
        let ranks = p["ranks"].as_array().cloned().unwrap_or_default();
        let bins = ranks
            .first()
            .and_then(|r| r["mpi_ns"].as_array())
            .map_or(0, Vec::len);
        for i in 0..bins {
            let (mut mpi, mut all) = (0u64, 0u64);
            for r in &ranks {
                let at = |k: &str| r[k][i].as_u64().unwrap_or(0);
                mpi += at("mpi_ns");
                all += at("mpi_ns") + at("io_ns") + at("useful_ns");
            }
            data.push((mpi * 100).checked_div(all).unwrap_or(0));
        }
    }
    // The latest bins when the terminal is narrower than the timeline.
    let keep = usize::from(width.saturating_sub(2));
    let data = data[data.len().saturating_sub(keep)..].to_vec();
    Sparkline::default()
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("MPI share over time (all ranks)"),
        )
        .max(100)
        .data(data)
        .style(Style::default().fg(Color::Red))
}

fn shares(p: &Program) -> Table<'static> {
    let rows = (0..p.ranks).map(|r| {
        let t = p.mpi_time_ns.get(r).copied().unwrap_or(0);
        let w = p.rank_wall_ns.get(r).copied().unwrap_or(0);
        let share = if w > 0 { t as f64 / w as f64 } else { 0.0 };
        let bar = "█".repeat((share.clamp(0.0, 1.0) * 20.0).round() as usize);
        Row::new(vec![
            Cell::from(format!("{r}")),
            Cell::from(format!("{:5.1}%", share * 100.0)),
            Cell::from(bar).style(Style::default().fg(Color::Blue)),
        ])
    });
    Table::new(
        rows.collect::<Vec<_>>(),
        [
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(vec!["rank", "MPI", ""]).style(Style::default().add_modifier(Modifier::BOLD)))
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title("MPI share per rank"),
    )
}

fn functions(p: &Program) -> Table<'static> {
    let mut fns: Vec<(&String, u64, u64)> = p
        .mpi
        .iter()
        .map(|(n, f)| (n, f.calls.iter().sum(), f.time_ns.iter().sum()))
        .collect();
    fns.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)));
    let rows: Vec<Row> = fns
        .iter()
        .take(20)
        .map(|(n, calls, time)| {
            Row::new(vec![
                n.to_string(),
                count(*calls as f64),
                hark_outputs::units::duration(*time as f64),
            ])
        })
        .collect();
    Table::new(
        rows,
        [
            Constraint::Min(20),
            Constraint::Length(10),
            Constraint::Length(12),
        ],
    )
    .header(
        Row::new(vec!["function", "calls", "time"])
            .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title("Top functions"),
    )
}

fn waits(p: &Program) -> Table<'static> {
    let mut w: Vec<(String, u64)> = p
        .waits
        .iter()
        .map(|(n, w)| (n.replace('_', " "), w.time_ns.iter().sum()))
        .filter(|(_, t)| *t > 0)
        .collect();
    w.sort_by_key(|x| std::cmp::Reverse(x.1));
    let mut rows: Vec<Row> = w
        .into_iter()
        .map(|(n, t)| Row::new(vec![n, hark_outputs::units::duration(t as f64)]))
        .collect();
    if let Some(e) = &p.efficiency {
        rows.push(Row::new(vec![
            "parallel efficiency".to_string(),
            format!("{:.1}%", e.parallel * 100.0),
        ]));
        rows.push(Row::new(vec![
            "load balance".to_string(),
            format!("{:.1}%", e.load_balance * 100.0),
        ]));
    }
    Table::new(rows, [Constraint::Min(20), Constraint::Length(12)]).block(
        Block::default()
            .borders(Borders::ALL)
            .title("Wait states, efficiencies"),
    )
}
