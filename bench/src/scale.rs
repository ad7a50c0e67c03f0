//! The scaling series: a policy of N grants, each on its own tool, where the called tool `t0` has two rules (a grant
//! and a prohibition) and the other N - 2 grants concern other tools. The same in remit, Cedar and Rego.

use std::fmt::Write;

pub struct Case {
    n: usize,
}

impl Case {
    pub fn new(n: usize) -> Case {
        assert!(n >= 3);
        Case { n }
    }

    pub fn request(&self) -> Vec<u8> {
        br#"{"subject":{"id":"agent:a"},"action":{"name":"t0","arguments":{"x":"v0"}},"resource":{"id":"r"},"context":{"mandate":"scale","now":"2026-12-01T00:00:00Z"}}"#.to_vec()
    }

    pub fn program(&self) -> remit_lang::ir::Program {
        let mut text = String::new();
        for i in 0..self.n - 1 {
            writeln!(text, "tool t{i}(x: string) {{\n  level draft\n}}").unwrap();
        }
        text.push_str("mandate scale for \"user:p\" {\n  holder \"agent:a\"\n");
        text.push_str("  allow t0 where args.x in [\"v0\", \"w0\"]\n  forbid t0 where args.x == \"bad\"\n");
        for i in 1..self.n - 1 {
            writeln!(text, "  allow t{i} where args.x == \"v{i}\"").unwrap();
        }
        text.push_str("}\n");
        let mut sources = remit_lang::stdlib::sources();
        sources.add("scale.remit", text);
        super::program_of(sources, &format!("scale {}", self.n))
    }

    pub fn cedar(&self) -> super::cedar::Setup {
        let mut text = String::from(
            "permit (principal == Agent::\"agent:a\", action == Action::\"t0\", resource)\n  when { context.mandate == \"scale\" && context.args has x && [\"v0\", \"w0\"].contains(context.args.x) };\n\
             forbid (principal, action == Action::\"t0\", resource)\n  when { context.args has x && context.args.x == \"bad\" };\n",
        );
        for i in 1..self.n - 1 {
            writeln!(
                text,
                "permit (principal == Agent::\"agent:a\", action == Action::\"t{i}\", resource)\n  when {{ context.mandate == \"scale\" && context.args has x && context.args.x == \"v{i}\" }};"
            )
            .unwrap();
        }
        let entities = r#"[{"uid":{"type":"Agent","id":"agent:a"},"attrs":{},"parents":[]}]"#;
        super::cedar::Setup::new(&text, entities)
    }

    /// The Rego policy, in files of at most 2,000 rules (regorus takes at most 1 MiB per file); one package.
    pub fn rego(&self) -> Vec<String> {
        let header = "package remit\n\nimport rego.v1\n\n";
        let mut files = vec![format!(
            "{header}default allow := false\n\n\
             allow if {{\n\tinput.context.mandate == \"scale\"\n\tinput.action.name == \"t0\"\n\tinput.action.arguments.x in {{\"v0\", \"w0\"}}\n\tnot forbidden\n}}\n\n\
             forbidden if {{\n\tinput.action.name == \"t0\"\n\tinput.action.arguments.x == \"bad\"\n}}\n\n\
             result := {{\"decision\": \"allow\"}} if allow else := {{\"decision\": \"deny\"}}\n\n"
        )];
        for i in 1..self.n - 1 {
            if i % 2_000 == 0 {
                files.push(header.to_string());
            }
            writeln!(
                files.last_mut().unwrap(),
                "allow if {{\n\tinput.context.mandate == \"scale\"\n\tinput.action.name == \"t{i}\"\n\tinput.action.arguments.x == \"v{i}\"\n}}\n"
            )
            .unwrap();
        }
        files
    }
}
