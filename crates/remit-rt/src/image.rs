//! The policy image: a checked policy as data, the one thing per policy in a decision module. The compiler
//! (`crates/remit-lang/src/wasm/image.rs`) writes it from `ir::Program`; the runtime reads it. Every record is defined once, here, as a
//! `#[repr(C)]` struct of `u32` fields written little-endian in field order ([`record!`]): the writer calls
//! `encode`, the reader `decode`, and tests/rt_image.rs writes every example's image and reads it back.
//!
//! Layout: a [`Header`] at offset 0, then tables of records and a string pool, every offset a byte offset from the
//! image's start. Names are found by hash ([`Image::find`]: open addressing over a word-wise FNV-1a of the unescaped name), and
//! each tool lists its rules per mandate, so a decision touches only the called tool's rules of the chain's
//! mandates, whatever the policy's size.
//!
//! The image is never trusted blindly: a read outside it gives zeros (and a string outside it is empty), so a
//! corrupt image decides wrongly but never traps.

/// `remit` + image version, the first word of every image.
pub const MAGIC: u32 = 0x7469_6d72; // "rmit"
pub const VERSION: u32 = 6;

/// Reads the little-endian `u32` at `at`, or 0 outside `image`.
#[inline(always)]
pub fn word(image: &[u8], at: usize) -> u32 {
    match image.get(at..at.wrapping_add(4)) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// Defines a record: a struct of `u32` fields, its size, and its encoding (field order, little-endian).
macro_rules! record {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[repr(C)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: u32,)*
        }

        impl $name {
            /// Bytes of one record.
            pub const SIZE: usize = core::mem::size_of::<$name>();

            /// Writes the record into `out`'s first [`Self::SIZE`] bytes (as far as `out` goes).
            pub fn encode(&self, out: &mut [u8]) {
                let mut at = 0;
                $(
                    for (d, s) in out.iter_mut().skip(at).zip(self.$field.to_le_bytes()) {
                        *d = s;
                    }
                    at += 4;
                )*
                let _ = at;
            }

            /// Reads the record at byte `at` of `image` (all zeros when it does not lie wholly inside). One bounds
            /// check per record: the fields are read from a fixed-size array at constant offsets, and a field the
            /// caller does not use is not read at all.
            #[inline(always)]
            pub fn decode(image: &[u8], at: u32) -> $name {
                let at = at as usize;
                let bytes: &[u8; $name::SIZE] =
                    match image.get(at..at.wrapping_add($name::SIZE)).and_then(|b| b.try_into().ok()) {
                        Some(bytes) => bytes,
                        None => return $name::default(),
                    };
                let mut _i = 0;
                $name {
                    $($field: {
                        let v = word(bytes, _i);
                        _i += 4;
                        v
                    },)*
                }
            }
        }
    };
}

record! {
    /// Where the image's tables are. Counts are of records; a `Str` is `(offset, length)` into the image.
    Header {
        magic,
        version,
        /// Bytes of the whole image.
        image_len,
        /// Bytes of the output area the module reserves after the image (`eval::output_limit`).
        output_limit,
        /// The policy hash as a JSON string (`"sha256:…"`, quotes included: written as is).
        policy_off, policy_len,
        /// The whole JSON of `remit_policy_info`.
        info_off, info_len,
        /// [`Tool`] records; the hash table of tool names (slots: tool index + 1, 0 empty; a power of two).
        tools_off, tools_count, tool_slots_off, tool_slots_len,
        /// Tool indices in the order of their names (the listing's order).
        listing_off,
        /// [`Mandate`] records and the hash table of their names.
        mandates_off, mandates_count, mandate_slots_off, mandate_slots_len,
        /// [`Kind`] records (approval kinds).
        kinds_off, kinds_count,
        /// [`Str`] records: the level names, lowest first.
        levels_off, levels_count,
        /// [`Entry`] records: every deciding rule a decision or listing can name.
        entries_off, entries_count,
        /// [`Calendar`] records: every calendar a condition reads, each once.
        calendars_off, calendars_count,
        /// [`Template`] records, in declaration order (added in version 4).
        templates_off, templates_count,
    }
}

record! {
    /// A calendar a condition reads (`ir::CalendarDef`): its name (the key of the request's `context.holidays`), its
    /// zone's offsets over the window of the mandates that read it (`remit_lang::time::ZoneTable::encode`, read by
    /// [`crate::time::ZoneTable::decode`]) and its weekly hours (`remit_lang::time::Calendar::encode`, read by
    /// [`crate::time::Calendar::decode`]), each a string of the image.
    Calendar {
        name_off, name_len,
        table_off, table_len,
        hours_off, hours_len,
    }
}

record! {
    /// A string in the image.
    Str { off, len }
}

record! {
    Tool {
        name_off, name_len,
        /// The name as a JSON string (quotes included).
        name_json_off, name_json_len,
        /// [`Param`] records.
        params_off, params_count,
        /// Position on the impact scale.
        level,
        /// [`TOOL_SIDE_EFFECTS`], [`TOOL_ADMINISTERS_MANDATES`], [`TOOL_OPEN_ARGUMENTS`].
        flags,
        /// [`Str`] records: scopes of which the credential must hold one (none: no requirement).
        scopes_off, scopes_count,
        /// [`RuleList`] records sorted by mandate: the rules of each mandate that cover this tool.
        lists_off, lists_count,
    }
}

pub const TOOL_SIDE_EFFECTS: u32 = 1;
pub const TOOL_ADMINISTERS_MANDATES: u32 = 2;
pub const TOOL_OPEN_ARGUMENTS: u32 = 4;

record! {
    /// A declared parameter of a tool.
    Param {
        name_off, name_len,
        /// A [`Type`] record's offset.
        ty,
        /// 1 when money may be negative (`signed`).
        signed,
    }
}

record! {
    /// The rules of one mandate that cover one tool, in the mandate's order: `u32` offsets of [`Rule`] records.
    RuleList { mandate, rules_off, rules_count }
}

record! {
    Mandate {
        name_off, name_len,
        /// The name, and the principal, as JSON strings (quotes included).
        name_json_off, name_json_len,
        principal_off, principal_len,
        /// The principal's text (what a stop's `principal` is compared with).
        principal_text_off, principal_text_len,
        /// Rank of the name in byte order among all mandate names (the order of `missing_approvals`).
        name_rank,
        /// [`Str`] records: the holders' ids.
        holders_off, holders_count,
        /// [`Str`] records: the `holder under` prefixes.
        holder_prefixes_off, holder_prefixes_count,
        /// Mandate indices, root first, this mandate last.
        chain_off, chain_count,
        /// The JSON array of the chain's names, as a decision writes `mandate_chain`.
        chain_json_off, chain_json_len,
        /// [`MANDATE_VALID_FROM`], [`MANDATE_VALID_UNTIL`], [`MANDATE_MAX_LEVEL`], [`MANDATE_ESCALATES`].
        flags,
        /// Seconds since the epoch (`i64` as two words, low first).
        valid_from_lo, valid_from_hi, valid_until_lo, valid_until_hi,
        max_level,
        /// Entry indices of the validity window, the stop, the level bound and the `otherwise` clause.
        validity_entry, stop_entry, level_entry, otherwise_entry,
        /// Entry indices of a listing's `stop (pause)`, `stop (cancel)`, `stop (revoke)`, `stop (quarantine)`; a
        /// decision writes the same entry with the stop's id after `stop`.
        pause_entry, cancel_entry, revoke_entry, quarantine_entry,
    }
}

pub const MANDATE_VALID_FROM: u32 = 1;
pub const MANDATE_VALID_UNTIL: u32 = 2;
pub const MANDATE_MAX_LEVEL: u32 = 4;
/// `otherwise escalate` (else `otherwise deny`).
pub const MANDATE_ESCALATES: u32 = 8;
/// The mandate an instance of a template decides as ([`Template::mandate`]): its record follows the policy's
/// mandates in the table (so it is never found by name), named as its template, held by no one (an instance's
/// holder is its own), with no window of its own (an instance's is its values'). Its chain is the template's
/// parent's chain and itself; `chain_json_*` is the parent's chain alone (a decision appends the instance's name).
pub const MANDATE_TEMPLATE: u32 = 16;

record! {
    /// A template (`ir::Template`), whose instances a request's `context.grants` carries. What a decision re-checks
    /// of an instance (`eval::grants::check`) and the texts a `grant.invalid` decision names, as JSON strings.
    Template {
        name_off, name_len,
        /// The index of its [`MANDATE_TEMPLATE`] mandate record.
        mandate,
        /// Its parent template's index + 1 (sub-delegation: its instances name their parent instance, `parent`); 0
        /// when its parent is a mandate. Version 5: before, 1 when its parent was a template (whose instances were
        /// refused).
        parent_template,
        /// [`TemplateParam`] records, in declaration order.
        params_off, params_count,
        /// [`Str`] records: `for` ids and prefixes (both empty: anyone), `holder` ids and prefixes.
        principals_off, principals_count, principal_prefixes_off, principal_prefixes_count,
        holders_off, holders_count, holder_prefixes_off, holder_prefixes_count,
        /// `valid from`/`valid until`: [`BOUND_NONE`], [`BOUND_AT`] (`*_lo`/`*_hi` whole seconds) or [`BOUND_PARAM`]
        /// (`*_lo` the parameter's index).
        from_kind, from_lo, from_hi, until_kind, until_lo, until_hi,
        /// JSON strings: `template NAME`, `template NAME under PARENT`, `for …`, `holder …`, `NAME(a, b)`, the window
        /// as written (`valid until until`), and the template's location (`file:line:column`).
        mismatch_json_off, mismatch_json_len,
        parent_json_off, parent_json_len,
        for_json_off, for_json_len,
        holder_json_off, holder_json_len,
        declared_json_off, declared_json_len,
        window_json_off, window_json_len,
        at_json_off, at_json_len,
        /// A JSON string: the window's location (`file:line:column` of `valid …`; the template's when not written),
        /// where a refusal of the instance's window is. Added in version 6.
        window_at_json_off, window_at_json_len,
    }
}

pub const BOUND_NONE: u32 = 0;
pub const BOUND_AT: u32 = 1;
pub const BOUND_PARAM: u32 = 2;

record! {
    /// A declared parameter of a template.
    TemplateParam {
        name_off, name_len,
        /// A [`Type`] record's offset.
        ty,
        /// 1 when its money may be negative (`signed`).
        signed,
        /// The bound: [`Node`] records (`Cond::True` when not written).
        cond_off, cond_count,
        /// JSON strings: the bound as written (`true` when not), the declaration (`cap: money`), and the
        /// parameter's location.
        bound_json_off, bound_json_len,
        declaration_json_off, declaration_json_len,
        at_json_off, at_json_len,
    }
}

/// The most instances a request's `context.grants` may carry (`eval::grants::MAX_GRANTS`): more is
/// `request.malformed`.
pub const MAX_GRANTS: usize = 256;

/// The most instances one chain holds (`eval::instance::MAX_INSTANCE_DEPTH`): an instance and the instances it hangs
/// under (a template under a template, its parent instance named by the entry's `parent`). An instance of a template
/// nested deeper is `grant.invalid`; a chain's instances are kept in a fixed array of this length.
pub const MAX_INSTANCE_DEPTH: usize = 8;

record! {
    /// An approval kind.
    Kind {
        name_off, name_len,
        /// The name as a JSON string (quotes included).
        name_json_off, name_json_len,
        /// Rank of the name in byte order among all kind names.
        name_rank,
        /// [`BINDS_TOOL`] …
        binds,
        ttl_lo, ttl_hi,
        single_use,
        /// 1 when the kind says `approved by` (only those it names may grant it), else 0 (anyone).
        approvers,
        /// 1 when `approved by` names the principal of the gate's chain.
        approver_principal,
        /// [`Str`] records: the identities and the `under` prefixes `approved by` names.
        approver_ids_off, approver_ids_count,
        approver_prefixes_off, approver_prefixes_count,
    }
}

pub const BINDS_TOOL: u32 = 1;
pub const BINDS_TARGET: u32 = 2;
pub const BINDS_ARGUMENTS: u32 = 4;
pub const BINDS_MANIFEST: u32 = 8;

record! {
    /// A deciding rule: the JSON `{"mandate":…,"rule":…,"at":…}` a decision writes, and its rank in the canonical
    /// order (`DecidingRule::sort_key`); equal entries share one record.
    ///
    /// An entry of a [`MANDATE_TEMPLATE`] mandate names the template where a decision names the instance
    /// (`TEMPLATE/ID@VERSION`): `instance` is then the length of its `{"mandate":"TEMPLATE"` head, which a decision
    /// replaces with the instance's name. Its rank is the template's: no mandate name lies between `TEMPLATE` and
    /// `TEMPLATE/…` (names are identifiers, whose bytes all sort after `/`, and mandates and templates share one
    /// namespace). `window` is 1 for the instance's window (`"rule":"valid"`), whose text a decision writes from
    /// the instance's instants (`valid from … until …`; no other clause's text begins with `valid`).
    ///
    /// `template` is the index + 1 of the template whose mandate the entry belongs to (0: a mandate's entry): which
    /// instance of a chain of instances (sub-delegation) it names. Added in version 5.
    Entry { json_off, json_len, rank, instance, window, template }
}

record! {
    Rule {
        /// [`RULE_ALLOW`] …
        kind,
        /// The condition: `cond_count` [`Node`] records from `cond_off`, in prefix order.
        cond_off, cond_count,
        /// The rule's entry index.
        entry,
        /// Gate: the [`Kind`] index.
        kind_index,
        /// Fact and budget: the name.
        name_off, name_len,
        /// Fact: the version; budget: the maximum (`u64` as two words, low first).
        number_lo, number_hi,
        /// Fact: 1 when stale escalates (else deny); gate: 1 when a missing approval escalates (else deny).
        escalates,
        /// Budget: rank of the counter's obligation JSON among all counters (the order of `obligations`).
        counter_rank,
        /// Fact: the version written as a string (then `number_*` are 0); `text_len` is 0 for a whole-number version
        /// (the checker refuses a blank one).
        text_off, text_len,
    }
}

pub const RULE_ALLOW: u32 = 0;
pub const RULE_FORBID: u32 = 1;
pub const RULE_LIMIT: u32 = 2;
pub const RULE_SCOPE: u32 = 3;
pub const RULE_GATE: u32 = 4;
pub const RULE_OPERATION_ID: u32 = 5;
pub const RULE_FACT: u32 = 6;
pub const RULE_BUDGET: u32 = 7;

record! {
    /// One node of a condition in prefix order: a constant, an atom, or `and`/`or` followed by its `arg` children.
    Node {
        /// [`NODE_TRUE`] …
        op,
        /// Atom: the [`Atom`] record's offset; `and`/`or`: the number of children.
        arg,
    }
}

pub const NODE_TRUE: u32 = 0;
pub const NODE_FALSE: u32 = 1;
pub const NODE_ATOM: u32 = 2;
pub const NODE_AND: u32 = 3;
pub const NODE_OR: u32 = 4;

/// The deepest nesting of `and`/`or` the runtime evaluates (its stack of open nodes); the compiler refuses deeper
/// conditions (the parser's nesting limit keeps them far below).
pub const MAX_COND_DEPTH: usize = 256;

/// The most deciding rules one decision collects: the rules of the called tool along the chain plus four clauses per
/// mandate (`check::limits::MAX_RULES_PER_TOOL`, which `remit check` enforces); the size of the runtime's lists.
pub const MAX_DECIDING: usize = 4096;

record! {
    /// One test on one attribute (`ir::Atom`).
    Atom {
        /// [`ATTR_ARG`] …
        attr,
        /// Argument or context attribute name.
        name_off, name_len,
        /// A [`Type`] record's offset: how the request's value is read.
        ty,
        /// [`TEST_EQ`] …
        test,
        /// The operand: `values_count` [`Value`] records from `values_off` (one for comparisons and `contains`;
        /// the list for `in` and `within`; a string for `under`).
        values_off, values_count,
        /// Context attributes: 1 when declared `signed` (arguments look it up on the called tool).
        signed,
        /// The atom in the language's words as a JSON string (`eval::cond::atom_text`): what a closest grant's
        /// `failed.condition` says.
        text_off, text_len,
        /// The attribute as the policy writes it (`ir::Attr::display`), as a JSON string: what `failed.attribute`
        /// and `unevaluable.attribute` say.
        attr_text_off, attr_text_len,
        /// An attribute derived from others ([`ATTR_COMPARE`], [`ATTR_MEMBER`], [`ATTR_RELATION`],
        /// [`ATTR_IN_CALENDAR`], [`ATTR_ELAPSED`]): `u32` offsets of its operands' [`Atom`] records, in the order they
        /// are read (a comparison's left and right sides, a membership's item and set, a relation's terms, a
        /// calendar's instant, a duration's later and earlier instants). An operand record says how the operand is read (`attr`,
        /// `name_*`, `ty`, `signed`); its test, values and operands are not used (operands are never derived).
        operands_off, operands_count,
        /// [`ATTR_COMPARE`] and [`ATTR_ELAPSED`]: the operator, [`TEST_EQ`] … [`TEST_GE`].
        op,
        /// [`ATTR_IN_CALENDAR`]: the index of its [`Calendar`] record.
        calendar,
        /// [`ATTR_ELAPSED`]: the duration compared with, whole seconds (`i64` as two words, low first).
        seconds_lo, seconds_hi,
    }
}

pub const ATTR_ARG: u32 = 0;
pub const ATTR_RESOURCE_ID: u32 = 1;
pub const ATTR_SUBJECT_ID: u32 = 2;
pub const ATTR_SUBJECT_SCOPES: u32 = 3;
pub const ATTR_CONTEXT: u32 = 4;
pub const ATTR_NOW: u32 = 5;
pub const ATTR_ATTEMPT: u32 = 6;
pub const ATTR_LEVEL: u32 = 7;
/// `subject.NAME`: `name_*` read from `subject.properties` (`signed`: money may be negative).
pub const ATTR_SUBJECT: u32 = 8;
/// `resource.NAME`: `name_*` read from `resource.properties`.
pub const ATTR_RESOURCE: u32 = 9;
/// A constant string, `name_*` (a relation's term written in the policy, or the mandate's principal): only an
/// operand.
pub const ATTR_TEXT: u32 = 10;
/// `left OP right`, a bool: two operands of one type (`ty` of each), compared with `op`.
pub const ATTR_COMPARE: u32 = 11;
/// `item in set`, a bool: two operands, the item and a set of its type.
pub const ATTR_MEMBER: u32 = 12;
/// `name(terms…)`, a bool: whether the request's `context.relations.NAME` (`name_*`) says the tuple of the
/// operands' texts holds.
pub const ATTR_RELATION: u32 = 13;
/// `instant in CALENDAR`, a bool: one operand, the instant (a timestamp); `calendar` the [`Calendar`] record's index,
/// `name_*` the calendar's name.
pub const ATTR_IN_CALENDAR: u32 = 14;
/// `later - earlier OP duration`, a bool: two operands, the later and the earlier instant (timestamps), the exact
/// time between them compared by `op` with `seconds_*` whole seconds.
pub const ATTR_ELAPSED: u32 = 15;
/// `principal.NAME`: `name_*` read from `context.principals.PRINCIPAL`, PRINCIPAL the principal of the request's
/// mandate (its record's `principal_text_*`); `signed` as for subjects. A code added to version 3: a runtime that
/// predates it reads it as mistyped, so an image that needs it fails closed there rather than decide otherwise.
pub const ATTR_PRINCIPAL: u32 = 16;
/// A template's parameter (`name_*`), read from the instance the request is decided under: its `params`, or the
/// implicit `principal`, `holder` (strings) and `granted` (a timestamp). Added in version 4; without an instance it
/// is mistyped (fails closed).
pub const ATTR_PARAM: u32 = 17;
/// `parent.NAME` in a template under a template (sub-delegation): the parameter `name_*` of the parent instance of
/// the instance whose condition reads it, as [`ATTR_PARAM`] reads its own instance's. Added in version 5; without a
/// parent instance it is mistyped (fails closed).
pub const ATTR_PARENT_PARAM: u32 = 18;

/// A relation's terms the runtime keeps at hand while it compares them with the listed tuples (`cond::holds`); a
/// relation with more terms reads the later ones again for each tuple (and weighs as unbounded, [`work_weight`]).
pub const RELATION_TERMS_KEPT: usize = 8;

pub const TEST_EQ: u32 = 0;
pub const TEST_NE: u32 = 1;
pub const TEST_LT: u32 = 2;
pub const TEST_LE: u32 = 3;
pub const TEST_GT: u32 = 4;
pub const TEST_GE: u32 = 5;
pub const TEST_IN: u32 = 6;
pub const TEST_NOT_IN: u32 = 7;
pub const TEST_UNDER: u32 = 8;
pub const TEST_NOT_UNDER: u32 = 9;
pub const TEST_CONTAINS: u32 = 10;
pub const TEST_NOT_CONTAINS: u32 = 11;
pub const TEST_WITHIN: u32 = 12;
pub const TEST_NOT_WITHIN: u32 = 13;

record! {
    /// A type (`ir::Type`).
    Type {
        /// [`TYPE_STRING`] …
        code,
        /// Enum: [`Str`] records of the variants.
        variants_off, variants_count,
        /// Set: the element [`Type`] record's offset.
        element,
    }
}

pub const TYPE_STRING: u32 = 0;
pub const TYPE_INT: u32 = 1;
pub const TYPE_DECIMAL: u32 = 2;
pub const TYPE_MONEY: u32 = 3;
pub const TYPE_BOOL: u32 = 4;
pub const TYPE_TIMESTAMP: u32 = 5;
pub const TYPE_DURATION: u32 = 6;
/// Identifiers of a declared kind: strings.
pub const TYPE_KIND: u32 = 7;
pub const TYPE_ENUM: u32 = 8;
pub const TYPE_SET: u32 = 9;
pub const TYPE_LEVEL: u32 = 10;

record! {
    /// A typed constant (`ir::Value`).
    Value {
        /// [`VALUE_STRING`] …
        tag,
        /// String: the text; money: the currency.
        str_off, str_len,
        /// Number and money (units of 10^-9), timestamp and duration (seconds), level, bool (0/1): an `i128` as
        /// four words, lowest first.
        n0, n1, n2, n3,
        /// Set: `items_count` [`Value`] records from `items_off`.
        items_off, items_count,
    }
}

pub const VALUE_STRING: u32 = 0;
pub const VALUE_NUMBER: u32 = 1;
pub const VALUE_MONEY: u32 = 2;
pub const VALUE_BOOL: u32 = 3;
pub const VALUE_TIMESTAMP: u32 = 4;
pub const VALUE_DURATION: u32 = 5;
pub const VALUE_LEVEL: u32 = 6;
pub const VALUE_SET: u32 = 7;

impl Value {
    /// The number the value holds (`n0..n3` as an `i128`).
    pub fn number(&self) -> i128 {
        let bits =
            u128::from(self.n0) | u128::from(self.n1) << 32 | u128::from(self.n2) << 64 | u128::from(self.n3) << 96;
        bits as i128
    }

    /// Sets `n0..n3` to `n`.
    pub fn set_number(&mut self, n: i128) {
        let bits = n as u128;
        self.n0 = bits as u32;
        self.n1 = (bits >> 32) as u32;
        self.n2 = (bits >> 64) as u32;
        self.n3 = (bits >> 96) as u32;
    }
}

/// Two words, low first, as an `i64`.
pub fn join64(lo: u32, hi: u32) -> i64 {
    (u64::from(lo) | u64::from(hi) << 32) as i64
}

/// An `i64` as two words, low first.
pub fn split64(n: i64) -> (u32, u32) {
    let bits = n as u64;
    (bits as u32, (bits >> 32) as u32)
}

/// The hash of the name tables: FNV-1a's step over eight bytes at a time (a little-endian word, the last one
/// zero-padded), 64-bit, the length mixed in first, folded to 32 bits. Eight bytes per multiplication rather than one:
/// a lookup hashes the request's tool and mandate names on every decision.
pub fn hash(bytes: impl Iterator<Item = u8>) -> u32 {
    let (mut h, mut word, mut n) = (HASH_BASIS, 0u64, 0usize);
    for b in bytes {
        word |= u64::from(b) << (8 * (n % 8));
        n += 1;
        if n % 8 == 0 {
            h = (h ^ word).wrapping_mul(HASH_PRIME);
            word = 0;
        }
    }
    if n % 8 != 0 {
        h = (h ^ word).wrapping_mul(HASH_PRIME);
    }
    fold(h ^ n as u64)
}

/// [`hash`] of a slice, reading its words whole.
#[inline]
pub fn hash_bytes(bytes: &[u8]) -> u32 {
    let mut h = HASH_BASIS;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        if let Ok(w) = <[u8; 8]>::try_from(w) {
            h = (h ^ u64::from_le_bytes(w)).wrapping_mul(HASH_PRIME);
        }
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let word = rest.iter().enumerate().fold(0u64, |w, (i, &b)| w | u64::from(b) << (8 * i));
        h = (h ^ word).wrapping_mul(HASH_PRIME);
    }
    fold(h ^ bytes.len() as u64)
}

const HASH_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const HASH_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64 bits to 32, the high half (where the multiplications carry) mixed into the low.
#[inline(always)]
fn fold(h: u64) -> u32 {
    let h = h.wrapping_mul(HASH_PRIME);
    (h ^ (h >> 32)) as u32
}

/// The policy's factor in the runtime's work bound (docs/module-v2.md, "The work bound"), up to `cap`: every tool
/// with its scopes and parameters, every rule of every tool (a rule covering several tools once per tool), every node
/// of its condition, and every element of each atom's operand and every operand of a derived attribute. A decision evaluates the called tool's rules and a
/// listing every tool's, each condition once, and an atom costs at most the size of its attribute's value in the
/// request times its operand's elements; so the part of a call's work that depends on the policy is at most this
/// weight times the request's length, times a constant.
/// Counting stops at `cap` (a corrupt image's counts cannot make it long: at most `cap` steps).
pub fn work_weight(image: &Image<'_>, cap: u64) -> u64 {
    let mut weight = 0u64;
    for t in 0..image.header.tools_count {
        let tool = image.tool(t);
        // The credential's scopes are matched against the tool's, and the arguments' names against its parameters.
        weight += 1 + u64::from(tool.scopes_count) + u64::from(tool.params_count);
        for l in 0..tool.lists_count {
            let list = RuleList::decode(image.bytes, Image::at(tool.lists_off, RuleList::SIZE, l));
            for k in 0..list.rules_count {
                let rule = Rule::decode(image.bytes, image.word(list.rules_off.wrapping_add(4 * k)));
                weight += 1;
                for i in 0..rule.cond_count {
                    let node = Node::decode(image.bytes, Image::at(rule.cond_off, Node::SIZE, i));
                    weight += 1;
                    if node.op == NODE_ATOM {
                        // A derived attribute reads each operand once, and a relation compares each listed
                        // tuple with its terms: the request's length times the operands.
                        let atom = Atom::decode(image.bytes, node.arg);
                        weight += u64::from(atom.values_count) + u64::from(atom.operands_count);
                        // Past [`RELATION_TERMS_KEPT`] terms, a relation reads its later terms again for each listed
                        // tuple (the request's length squared): no bound by this weight, so none is claimed.
                        if atom.attr == ATTR_RELATION && atom.operands_count as usize > RELATION_TERMS_KEPT {
                            return cap;
                        }
                    }
                    if weight >= cap {
                        return cap;
                    }
                }
                if weight >= cap {
                    return cap;
                }
            }
        }
    }
    // Each instance of a request is checked against its template: every bound once.
    for t in 0..image.header.templates_count {
        let template = image.template(t);
        for p in 0..template.params_count {
            let param = image.template_param(&template, p);
            for i in 0..param.cond_count {
                let node = Node::decode(image.bytes, Image::at(param.cond_off, Node::SIZE, i));
                weight += 1;
                if node.op == NODE_ATOM {
                    let atom = Atom::decode(image.bytes, node.arg);
                    weight += u64::from(atom.values_count) + u64::from(atom.operands_count);
                }
                if weight >= cap {
                    return cap;
                }
            }
        }
    }
    weight
}

/// A policy image being read.
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    pub bytes: &'a [u8],
    pub header: Header,
}

impl<'a> Image<'a> {
    /// The image in `bytes`; `None` when its magic or version is not this runtime's.
    pub fn new(bytes: &'a [u8]) -> Option<Image<'a>> {
        let mut header = Header::decode(bytes, 0);
        if header.magic != MAGIC || header.version != VERSION {
            return None;
        }
        let bytes = bytes.get(..header.image_len as usize).unwrap_or(bytes);
        // A table cannot hold more records than fit between its offset and the image's end, so that a corrupt
        // count cannot make a loop run long (loops over records are bounded by the header's counts).
        let fit = |off: u32, count: &mut u32, size: usize| {
            let room = (bytes.len() as u64).saturating_sub(u64::from(off));
            if u64::from(*count) * size as u64 > room {
                *count = (room / size as u64) as u32;
            }
        };
        let h = &mut header;
        fit(h.tools_off, &mut h.tools_count, Tool::SIZE);
        fit(h.tool_slots_off, &mut h.tool_slots_len, 4);
        fit(h.listing_off, &mut h.tools_count, 4);
        fit(h.mandates_off, &mut h.mandates_count, Mandate::SIZE);
        fit(h.mandate_slots_off, &mut h.mandate_slots_len, 4);
        fit(h.kinds_off, &mut h.kinds_count, Kind::SIZE);
        fit(h.levels_off, &mut h.levels_count, Str::SIZE);
        fit(h.entries_off, &mut h.entries_count, Entry::SIZE);
        fit(h.calendars_off, &mut h.calendars_count, Calendar::SIZE);
        fit(h.templates_off, &mut h.templates_count, Template::SIZE);
        Some(Image { bytes, header })
    }

    /// The string at `(off, len)`, empty outside the image.
    #[inline(always)]
    pub fn str(&self, off: u32, len: u32) -> &'a [u8] {
        self.bytes.get(off as usize..(off as usize).wrapping_add(len as usize)).unwrap_or(&[])
    }

    /// The `u32` at `at`.
    #[inline(always)]
    pub fn word(&self, at: u32) -> u32 {
        word(self.bytes, at as usize)
    }

    /// Record `i` of a table of records of `size` bytes from `off`.
    #[inline(always)]
    pub fn at(off: u32, size: usize, i: u32) -> u32 {
        off.wrapping_add((size as u32).wrapping_mul(i))
    }

    #[inline(always)]
    pub fn tool(&self, i: u32) -> Tool {
        Tool::decode(self.bytes, Image::at(self.header.tools_off, Tool::SIZE, i))
    }

    #[inline(always)]
    pub fn mandate(&self, i: u32) -> Mandate {
        Mandate::decode(self.bytes, Image::at(self.header.mandates_off, Mandate::SIZE, i))
    }

    pub fn template(&self, i: u32) -> Template {
        Template::decode(self.bytes, Image::at(self.header.templates_off, Template::SIZE, i))
    }

    pub fn template_param(&self, template: &Template, i: u32) -> TemplateParam {
        TemplateParam::decode(self.bytes, Image::at(template.params_off, TemplateParam::SIZE, i))
    }

    /// The template named by the string token `name` (templates are few: a scan).
    pub fn find_template(&self, doc: &crate::json::Doc<'_>, name: u32) -> Option<u32> {
        (0..self.header.templates_count).find(|&t| {
            let template = self.template(t);
            doc.text_is(name, self.str(template.name_off, template.name_len))
        })
    }

    #[inline(always)]
    pub fn kind(&self, i: u32) -> Kind {
        Kind::decode(self.bytes, Image::at(self.header.kinds_off, Kind::SIZE, i))
    }

    #[inline(always)]
    pub fn entry(&self, i: u32) -> Entry {
        Entry::decode(self.bytes, Image::at(self.header.entries_off, Entry::SIZE, i))
    }

    /// Calendar record `i` (all zeros past the table: its strings are then empty, which no decode accepts).
    pub fn calendar(&self, i: u32) -> Calendar {
        if i >= self.header.calendars_count {
            return Calendar::default();
        }
        Calendar::decode(self.bytes, Image::at(self.header.calendars_off, Calendar::SIZE, i))
    }

    /// The [`Str`] record `i` of a list from `off`, as bytes.
    pub fn str_at(&self, off: u32, i: u32) -> &'a [u8] {
        let s = Str::decode(self.bytes, Image::at(off, Str::SIZE, i));
        self.str(s.off, s.len)
    }

    /// The index of the record whose name is `name` (unescaped bytes, given twice: once to hash, once to compare)
    /// in the hash table at `slots_off` of `slots_len` slots (a power of two), `name_of` giving each index's name.
    pub fn find<I, F>(&self, slots_off: u32, slots_len: u32, name: impl Fn() -> I, name_of: F) -> Option<u32>
    where
        I: Iterator<Item = u8>,
        F: Fn(u32) -> &'a [u8],
    {
        if slots_len == 0 {
            return None;
        }
        let mask = slots_len.wrapping_sub(1);
        let mut slot = hash(name()) & mask;
        // Every probe sequence ends at an empty slot: the writer keeps the table at most half full.
        let mut probes = 0;
        while probes < slots_len {
            let v = self.word(slots_off.wrapping_add(slot.wrapping_mul(4)));
            if v == 0 {
                return None;
            }
            let index = v - 1;
            if name().eq(name_of(index).iter().copied()) {
                return Some(index);
            }
            slot = slot.wrapping_add(1) & mask;
            probes += 1;
        }
        None
    }

    /// [`Image::find`] for a name given as bytes.
    #[inline]
    pub fn find_bytes<F>(&self, slots_off: u32, slots_len: u32, name: &[u8], name_of: F) -> Option<u32>
    where
        F: Fn(u32) -> &'a [u8],
    {
        if slots_len == 0 {
            return None;
        }
        let mask = slots_len.wrapping_sub(1);
        let mut slot = hash_bytes(name) & mask;
        let mut probes = 0;
        while probes < slots_len {
            let v = self.word(slots_off.wrapping_add(slot.wrapping_mul(4)));
            if v == 0 {
                return None;
            }
            if crate::same_bytes(name_of(v - 1), name) {
                return Some(v - 1);
            }
            slot = slot.wrapping_add(1) & mask;
            probes += 1;
        }
        None
    }

    /// The parameter of `tool` whose name `is_name` accepts (parameter names are distinct).
    pub fn param(&self, tool: &Tool, is_name: impl Fn(&[u8]) -> bool) -> Option<Param> {
        (0..tool.params_count)
            .map(|i| Param::decode(self.bytes, Image::at(tool.params_off, Param::SIZE, i)))
            .find(|p| is_name(self.str(p.name_off, p.name_len)))
    }

    /// The name of tool `i` (`name_off`, `name_len` are a record's first two words: only they are read).
    #[inline]
    pub fn tool_name(&self, i: u32) -> &'a [u8] {
        let at = Image::at(self.header.tools_off, Tool::SIZE, i);
        self.str(self.word(at), self.word(at.wrapping_add(4)))
    }

    /// The name of mandate `i` (its record's first two words).
    #[inline]
    pub fn mandate_name(&self, i: u32) -> &'a [u8] {
        let at = Image::at(self.header.mandates_off, Mandate::SIZE, i);
        self.str(self.word(at), self.word(at.wrapping_add(4)))
    }
}

/// The hash table the writer stores for `names` (index `i` has name `names[i]`): `slots` words, a power of two at
/// least twice the count, each 0 (empty) or index + 1, filled by linear probing from [`hash`]. Written here so
/// that writer and reader share it.
#[cfg(any(test, feature = "std"))]
pub fn hash_table(names: &[&[u8]]) -> std::vec::Vec<u32> {
    let len = (names.len() * 2).max(1).next_power_of_two();
    let mut slots = std::vec![0u32; len];
    let mask = (len - 1) as u32;
    for (i, name) in names.iter().enumerate() {
        let mut slot = hash_bytes(name) & mask;
        while slots[slot as usize] != 0 {
            slot = (slot + 1) & mask;
        }
        slots[slot as usize] = i as u32 + 1;
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let m = Mandate { name_off: 7, chain_count: 3, otherwise_entry: u32::MAX, ..Mandate::default() };
        let mut buf = vec![0u8; 4 + Mandate::SIZE];
        m.encode(&mut buf[4..]);
        assert_eq!(Mandate::decode(&buf, 4), m);
        // Outside the image: zeros.
        assert_eq!(Mandate::decode(&buf, 8).otherwise_entry, 0);
    }

    #[test]
    fn numbers_split_and_join() {
        let mut v = Value::default();
        for n in [0i128, -1, 1, i128::MAX, i128::MIN, -25_000_000_000] {
            v.set_number(n);
            assert_eq!(v.number(), n);
        }
        for n in [0i64, -1, i64::MAX, i64::MIN] {
            let (lo, hi) = split64(n);
            assert_eq!(join64(lo, hi), n);
        }
    }

    #[test]
    fn names_are_found_by_hash() {
        let names: Vec<&[u8]> = vec![b"pay", b"read_orders", b"a", b"", b"content.edit"];
        let slots = hash_table(&names);
        let mut bytes = vec![0u8; 16];
        for s in &slots {
            bytes.extend_from_slice(&s.to_le_bytes());
        }
        let image = Image { bytes: &bytes, header: Header::default() };
        for (i, name) in names.iter().enumerate() {
            let found = image.find(16, slots.len() as u32, || name.iter().copied(), |j| names[j as usize]);
            assert_eq!(found, Some(i as u32));
        }
        assert_eq!(image.find(16, slots.len() as u32, || b"nope".iter().copied(), |j| names[j as usize]), None);
    }

    #[test]
    fn hash_of_bytes_is_hash_of_their_iterator() {
        let text: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        for start in 0..8 {
            for end in start..text.len() {
                let bytes = &text[start..end];
                assert_eq!(hash_bytes(bytes), hash(bytes.iter().copied()), "{start}..{end}");
            }
        }
        assert_ne!(hash_bytes(b"a"), hash_bytes(b"a\0"));
    }
}
