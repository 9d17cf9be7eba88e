//! What the command line prints: outcomes, waiting drafts, a draft's status and the schedule,
//! as text or (`--json`) as the interfaces' JSON.

use crate::app::App;
use crate::budget::Deadline;
use crate::key::PostKey;
use crate::networks::Network;
use crate::outcome::Outcome;
use serde_json::json;

/// `postonce sweep`: the sweep's report, as text or JSON.
pub(super) async fn sweep(app: &App, dl: &Deadline, json: bool) -> i32 {
    match app.pipeline.sweep(dl).await {
        Ok(report) => {
            if json {
                println!("{}", serde_json::to_string(&report).unwrap_or_default());
            } else {
                println!(
                    "examined {} drafts ({} due by schedule); ran {}; delayed by pacing {}; needs review {}; told {}; not delivered {}; left for later {}; waiting for you {}",
                    report.examined,
                    report.due,
                    report.runs.len(),
                    report.delayed.len(),
                    report.needs_review.len(),
                    report.reminded.len(),
                    report.undelivered.len(),
                    report.left_for_later,
                    report.waiting.len()
                );
                for o in &report.runs {
                    println!("  {} {}: {}", o.outcome.as_str(), o.key, o.detail);
                }
                for d in &report.delayed {
                    println!("  delayed {} until {}: {}", d.key, d.until, d.reason);
                }
                for s in &report.spread {
                    let next = s.next.as_deref().map_or_else(
                        || "not sent again".to_owned(),
                        |at| format!("sent again at {at}"),
                    );
                    let done = if s.complete {
                        "everywhere"
                    } else {
                        "not everywhere"
                    };
                    println!("  spread {} ({done}; {next}): {}", s.key, s.detail);
                }
                print_waiting(&report.waiting);
            }
            0
        }
        Err(e) => {
            eprintln!("postonce: sweep failed: {e}");
            4
        }
    }
}

/// `postonce schedule list`: every scheduled target, soonest first, grouped by draft.
pub(super) async fn schedule_list(app: &App, dl: Deadline, json: bool) -> i32 {
    let entries = match crate::triggers::stored::scheduled_entries(app, &dl).await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("postonce: cannot list the scheduled drafts: {e}");
            return 4;
        }
    };
    if json {
        println!("{}", crate::triggers::stored::scheduled_json(&entries));
        return 0;
    }
    if entries.is_empty() {
        println!("nothing is scheduled");
    }
    for e in &entries {
        println!(
            "{}  {}  → {}",
            crate::record::rfc3339(e.at),
            e.key,
            e.targets.join(", ")
        );
        if let Some(n) = &e.note {
            println!("  {n}");
        }
    }
    0
}

pub(super) fn print_outcome(outcome: &Outcome, json: bool) {
    if json {
        println!("{}", serde_json::to_string(outcome).unwrap_or_default());
        return;
    }
    let dry = |o: &Outcome| {
        if o.dry_run {
            format!(" (dry run: nothing was sent to {})", o.network.label())
        } else {
            String::new()
        }
    };
    let body = |o: &Outcome, indent: &str| {
        if let Some(url) = o.post_url() {
            println!("{indent}{url}");
        } else if let Some(urn) = &o.post_id {
            println!("{indent}{urn}");
        }
        if !o.detail.is_empty() {
            println!("{indent}{}", o.detail);
        }
        if let Some(image) = &o.image {
            println!("{indent}image: {}", image.describe());
        }
    };
    if outcome.parts.is_empty() {
        println!(
            "{}: {}{}",
            outcome.outcome.as_str(),
            outcome.key,
            dry(outcome)
        );
        body(outcome, "  ");
        return;
    }
    // Several targets: the combined outcome, then one block per target.
    println!(
        "{}: {} ({})",
        outcome.outcome.as_str(),
        outcome.key,
        outcome.detail
    );
    for part in &outcome.parts {
        println!(
            "  {}: {}{}",
            part.network.as_str(),
            part.outcome.as_str(),
            dry(part)
        );
        body(part, "    ");
    }
}

pub(super) fn print_waiting(waiting: &[crate::pipeline::Waiting]) {
    for w in waiting {
        println!(
            "  {} [{}{}] {}{}",
            w.key,
            w.status,
            if w.owner_told { "" } else { ", not told yet" },
            w.reason,
            w.last_error
                .as_deref()
                .map(|e| format!(" (last error: {e})"))
                .unwrap_or_default()
        );
    }
}

pub(super) async fn status_all(app: &App, dl: Deadline, json: bool) -> i32 {
    let waiting = match app.pipeline.waiting(&dl).await {
        Ok(w) => w,
        Err(e) => {
            eprintln!("postonce: {e}");
            return 4;
        }
    };
    if json {
        println!("{}", json!({ "waiting": waiting }));
    } else if waiting.is_empty() {
        println!("nothing waits for you");
    } else {
        println!("{} drafts wait for you:", waiting.len());
        print_waiting(&waiting);
    }
    0
}

pub(super) async fn status(app: &App, key: &PostKey, dl: Deadline, json: bool) -> i32 {
    let found = match crate::triggers::stored::key_status(app, key, &dl).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("postonce: {e}");
            return 4;
        }
    };
    if json {
        println!("{}", found.json);
        return 0;
    }
    for (k, network, status, has) in &found.targets {
        if *has || network.bare_names() {
            print_target_status(k, *network, status);
        }
    }
    0
}

fn print_target_status(key: &PostKey, network: Network, status: &crate::pipeline::Status) {
    println!("{}  ({key})", network.as_str());
    match &status.snapshot.record {
        Some(r) => println!(
            "  record: posted {} at {} by {} ({})",
            r.url
                .as_deref()
                .or(r.post_id.as_deref())
                .unwrap_or("(no id: confirmed by the owner, or the network did not name it)"),
            crate::record::rfc3339(r.posted_at),
            r.source,
            r.run
        ),
        None => println!("  record: none (not posted)"),
    }
    if let Some(cid) = status
        .snapshot
        .record
        .as_ref()
        .and_then(|r| r.cid.as_deref())
    {
        println!("  cid:    {cid}");
    }
    match &status.snapshot.draft {
        Some(d) => {
            let when = match d.status {
                crate::record::DraftStatus::Scheduled => d
                    .goes_at()
                    .map(|at| format!(" for {}", crate::record::rfc3339(at)))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            println!(
                "  draft:  {}{when} (attempts {}{})",
                d.status.as_str(),
                d.attempts,
                d.last_error
                    .as_deref()
                    .map(|e| format!("; last error: {e}"))
                    .unwrap_or_default()
            );
        }
        None => println!("  draft:  none"),
    }
    match &status.claim {
        Some((v, ttl)) => println!(
            "  claim:  {} (expires in {:?})",
            v.raw(),
            ttl.unwrap_or_default()
        ),
        None => println!("  claim:  none"),
    }
}
