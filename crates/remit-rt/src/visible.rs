//! Tool listing, the twin of `crates/remit-lang/src/eval/visible.rs`: which tools a gateway should show an agent before any call is
//! made. A tool is hidden only when every call to it would be denied whatever its arguments, with the first such
//! reason in the documented order; anything that depends on the call is left to [`crate::decide::decide`]. Uses
//! [`crate::decide`]'s checks; never used by it.

use crate::cond::{self, Env};
use crate::decide::{find, lacks_scope, level_exceeded, rule_list, stop_at, stop_for, window_of, Work};
use crate::err;
use crate::grants::{self, Instances, Under};
use crate::image::{self, Image, Mandate, Rule, Tool};
use crate::json::{Doc, Parsed};
use crate::out::Out;
use crate::request::{self, Need, Request};
use crate::Sink;

/// Writes the listing of the parsed request's subject and context, exactly `remit_lang::eval::visible_tools(…).to_json()`:
/// `{"visible":[…],"hidden":[{"tool":…,"reason":…,"rule":{…}}]}`, each list in the order of the tools' names.
pub fn visible_tools(image: &Image<'_>, parsed: Parsed<'_>, work: &mut Work, out: &mut Out<'_>) {
    let (doc, keys) = match parsed {
        Ok(p) => p,
        Err(e) => return hide_all(image, out, first(err::of_request(request::RequestError::json(e)))),
    };
    let req = match request::parse(&doc, Need::Listing) {
        Ok(req) => req,
        // `request.malformed` sorts first, so it wins when both apply.
        Err(e) => return hide_all(image, out, first(err::of_request(e))),
    };
    let h = image.header;
    let named = req
        .mandate
        .and_then(|tok| find(image, h.mandate_slots_off, h.mandate_slots_len, &doc, tok, |i| image.mandate_name(i)));
    // Resolved and checked as a decision is (`eval::visible_tools`): the first reason hides every tool.
    let mut instances = Instances::NONE;
    let leaf = match grants::resolve(image, &doc, &req, named) {
        Ok(Under::Mandate(leaf)) => image.mandate(leaf),
        Ok(Under::Instance(t, grant)) => {
            let leaf = image.mandate(image.template(t).mandate);
            if !doc.text_eq(grant.holder, req.subject_id) {
                return hide_all(image, out, err::SUBJECT_NOT_HOLDER);
            }
            let env = Env::new(image, &doc, &req, 0, true, &leaf);
            let (found, broken) = grants::lineage(image, &doc, &req, t, grant);
            instances = found;
            if grants::check(image, &env, &mut instances, broken).is_err() {
                return hide_all(image, out, err::GRANT_INVALID);
            }
            leaf
        }
        Err((code, _)) => return hide_all(image, out, code),
    };
    if instances.leaf().is_none() && !crate::decide::is_holder(image, &doc, &leaf, req.subject_id) {
        return hide_all(image, out, err::SUBJECT_NOT_HOLDER);
    }
    let instances = &instances;
    // The stop entry of each mandate of the chain, for a tool with side effects and for one without (u32::MAX: none),
    // found once: they depend on the tool only through that, and reading every stop item for every tool would make
    // the listing's work the product of the tools and the request's length.
    let stops = work.stops.get_mut(..2 * leaf.chain_count as usize);
    let stops = match stops {
        Some(stops) => {
            for p in 0..leaf.chain_count {
                let index = image.word(leaf.chain_off.wrapping_add(4 * p));
                let mandate = image.mandate(index);
                let instance = instances.of_mandate(index);
                for (k, side_effects) in [(0, true), (1, false)] {
                    let entry = stop_for(image, &doc, &mandate, instance, side_effects, &req)
                        .map_or(u32::MAX, |s| stop_entry(&mandate, s.strength));
                    if let Some(slot) = stops.get_mut(2 * p as usize + k) {
                        *slot = entry;
                    }
                }
            }
            Some(&*stops)
        }
        None => None,
    };
    // Two passes over the tools in name order: the visible ones, then the hidden ones with their reasons. Each tool is
    // judged once, in the first pass: its verdict is kept in the parse's key slots (free once the request is read:
    // a listing reads no approvals), two per tool, `(code, entry)` with code 0 for a visible tool; a policy with more
    // tools than that is judged again in the second pass.
    let mut kept = keys.get_mut(..2 * h.tools_count as usize);
    out.write(b"{\"visible\":[");
    let mut first_item = true;
    for i in 0..h.tools_count {
        let tool = image.word(h.listing_off.wrapping_add(4 * i));
        let verdict = hidden_because(image, &doc, &req, &leaf, instances, tool, stops);
        if let Some([code, entry]) = kept.as_deref_mut().and_then(|k| k.get_mut(2 * i as usize..2 * i as usize + 2)) {
            *code = verdict.map_or(0, |(code, _)| code);
            *entry = verdict.and_then(|(_, entry)| entry).unwrap_or(u32::MAX);
        }
        if verdict.is_none() {
            if !first_item {
                out.byte(b',');
            }
            first_item = false;
            let t = image.tool(tool);
            out.write(image.str(t.name_json_off, t.name_json_len));
        }
    }
    out.write(b"],\"hidden\":[");
    let mut first_item = true;
    for i in 0..h.tools_count {
        let tool = image.word(h.listing_off.wrapping_add(4 * i));
        let verdict = match kept.as_deref().and_then(|k| k.get(2 * i as usize..2 * i as usize + 2)) {
            Some(&[0, _]) => None,
            Some(&[code, entry]) => Some((code, Some(entry).filter(|&e| e != u32::MAX))),
            _ => hidden_because(image, &doc, &req, &leaf, instances, tool, stops),
        };
        if let Some((code, entry)) = verdict {
            if !first_item {
                out.byte(b',');
            }
            first_item = false;
            write_hidden(image, &doc, instances, out, tool, code, entry);
        }
    }
    out.write(b"]}");
}

/// The lowest code of a set.
fn first(codes: u32) -> u32 {
    codes & codes.wrapping_neg()
}

fn write_hidden(
    image: &Image<'_>,
    doc: &Doc<'_>,
    instances: &Instances,
    out: &mut Out<'_>,
    tool: u32,
    code: u32,
    entry: Option<u32>,
) {
    out.write(b"{\"tool\":");
    let t = image.tool(tool);
    out.write(image.str(t.name_json_off, t.name_json_len));
    out.write(b",\"reason\":\"");
    out.write(err::name(code).as_bytes());
    out.byte(b'"');
    if let Some(entry) = entry {
        out.write(b",\"rule\":");
        crate::decide::write_entry(image, doc, instances, entry, false, out);
    }
    out.byte(b'}');
}

/// Every tool hidden for one reason, with no rule.
fn hide_all(image: &Image<'_>, out: &mut Out<'_>, code: u32) {
    out.write(b"{\"visible\":[],\"hidden\":[");
    for i in 0..image.header.tools_count {
        if i > 0 {
            out.byte(b',');
        }
        let tool = image.word(image.header.listing_off.wrapping_add(4 * i));
        out.write(b"{\"tool\":");
        let t = image.tool(tool);
        out.write(image.str(t.name_json_off, t.name_json_len));
        out.write(b",\"reason\":\"");
        out.write(err::name(code).as_bytes());
        out.write(b"\"}");
    }
    out.write(b"]}");
}

/// A listing's entry for a stop of `strength` at `mandate`: `stop` for a bare name, else `stop (LEVEL)`.
fn stop_entry(mandate: &Mandate, strength: u32) -> u32 {
    match strength {
        0 => mandate.stop_entry,
        1 => mandate.pause_entry,
        2 => mandate.cancel_entry,
        3 => mandate.revoke_entry,
        _ => mandate.quarantine_entry,
    }
}

/// The lowest-ranked of the entries offered: among several clauses giving the same reason, the one a decision
/// would list first.
#[derive(Default)]
struct Lowest {
    found: Option<(u32, u32)>,
}

impl Lowest {
    fn offer(&mut self, image: &Image<'_>, entry: u32) {
        let rank = image.entry(entry).rank;
        match self.found {
            Some((best, _)) if best <= rank => {}
            _ => self.found = Some((rank, entry)),
        }
    }

    fn entry(&self) -> Option<u32> {
        self.found.map(|(_, e)| e)
    }
}

/// The first reason, in the documented order, that denies every call to `tool`, with its clause.
fn hidden_because(
    image: &Image<'_>,
    doc: &Doc<'_>,
    req: &Request,
    leaf: &Mandate,
    instances: &Instances,
    tool_index: u32,
    stops: Option<&[u32]>,
) -> Option<(u32, Option<u32>)> {
    let tool: Tool = image.tool(tool_index);
    if tool.flags & image::TOOL_ADMINISTERS_MANDATES != 0 {
        return Some((err::SELF_MODIFICATION, None));
    }
    if lacks_scope(image, doc, &tool, req) {
        return Some((err::SCOPE_MISSING, None));
    }
    let mandate_at = |p: u32| image.word(leaf.chain_off.wrapping_add(4 * p));
    let (mut not_yet, mut expired, mut stopped, mut level) =
        (Lowest::default(), Lowest::default(), Lowest::default(), Lowest::default());
    for p in 0..leaf.chain_count {
        let index = mandate_at(p);
        let mandate = image.mandate(index);
        let instance = instances.of_mandate(index);
        match window_of(&mandate, instance, req.now) {
            Some((code, entry)) if code == err::NOT_YET_VALID => not_yet.offer(image, entry),
            Some((_, entry)) => expired.offer(image, entry),
            None => {}
        }
        let side_effects = tool.flags & image::TOOL_SIDE_EFFECTS != 0;
        let found = match stops {
            Some(stops) => stops.get(2 * p as usize + usize::from(!side_effects)).copied().filter(|&e| e != u32::MAX),
            None => stop_at(image, doc, &mandate, instance, &tool, req).map(|s| stop_entry(&mandate, s.strength)),
        };
        if let Some(entry) = found {
            stopped.offer(image, entry);
        }
        if level_exceeded(&mandate, &tool) {
            level.offer(image, mandate.level_entry);
        }
    }
    for (code, lowest) in [
        (err::NOT_YET_VALID, &not_yet),
        (err::EXPIRED, &expired),
        (err::STOP_ACTIVE, &stopped),
        (err::LEVEL_EXCEEDED, &level),
    ] {
        if let Some(entry) = lowest.entry() {
            return Some((code, Some(entry)));
        }
    }

    let base = Env::new(image, doc, req, tool_index, true, leaf);
    let (mut forbidding, mut unmatched) = (Lowest::default(), Lowest::default());
    for p in 0..leaf.chain_count {
        let index = mandate_at(p);
        let mandate = image.mandate(index);
        let instance = instances.of_mandate(index).copied();
        let env = Env { instance, parent: instances.parent_of(index).copied(), ..base };
        let mut may_grant = false;
        let list = rule_list(image, &tool, index);
        for k in 0..list.rules_count {
            let rule = Rule::decode(image.bytes, image.word(list.rules_off.wrapping_add(4 * k)));
            match rule.kind {
                // Matches (or fails, which also forbids) whatever the arguments.
                image::RULE_FORBID if !cond::possible(image, rule.cond_off, rule.cond_count, &env).can_be_false() => {
                    forbidding.offer(image, rule.entry);
                }
                image::RULE_ALLOW if cond::possible(image, rule.cond_off, rule.cond_count, &env).can_be_true() => {
                    may_grant = true;
                }
                _ => {}
            }
        }
        if !may_grant {
            unmatched.offer(image, mandate.otherwise_entry);
        }
    }
    if let Some(entry) = forbidding.entry() {
        return Some((err::FORBIDDEN, Some(entry)));
    }
    unmatched.entry().map(|entry| (err::UNMATCHED, Some(entry)))
}
