//! `remit serve --config FILE`: the gateway's settings from a TOML file and from `REMIT_*` environment variables,
//! layered under the command line (docs/gateway.md "Configuration"). Every flag of `remit serve` is a key of the
//! file, written as the flag without its dashes (`listen = "0.0.0.0:8181"`, `store-connections = 32`,
//! `admin-token-file = ["/run/secrets/admins"]`), and a variable `REMIT_` + the key in capitals (`REMIT_LISTEN`).
//! Precedence: the command line, then the environment, then the file, then the flag's default.
//!
//! How: the layers become command-line arguments. The command line is parsed once (with the policy not yet
//! required, since the file may name it) to learn which flags it set; each flag it did not set is taken from its
//! variable, else from the file, checked here by the flag's own value parser (so that an error names the key and the
//! file, or the variable), and added to the arguments that clap then parses as usual. So a setting means the same
//! from any layer, and there is one definition of each flag: clap's. Depends on clap and toml only; knows nothing
//! of the gateway.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::builder::Resettable;
use clap::parser::ValueSource;
use clap::{ArgAction, Command};

/// The keys whose values are files: a relative path in the file is relative to the file's folder (where it was
/// written), not to the gateway's working directory. `store`'s `sqlite:PATH` too.
const PATH_KEYS: &[&str] = &[
    "policy",
    "store-password-file",
    "store-ssl-root-cert",
    "store-ssl-cert",
    "store-ssl-key",
    "store-ssl-crl",
    "inbox-token-file",
    "admin-token-file",
    "pep-token-file",
    "tls-cert",
    "tls-key",
    "client-ca",
    "verify-key",
    "world",
    "log-key",
];

/// The arguments `argv` means once `remit serve`'s configuration file (`--config`, `REMIT_CONFIG`) and `REMIT_*`
/// variables are added under it; `argv` unchanged for every other command. `command` is the whole CLI's.
pub fn layered(
    command: Command,
    argv: Vec<OsString>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<OsString>, String> {
    // The policy may come from the file: not required in this first parse (the final parse requires it).
    let probe = command.clone().mut_subcommand("serve", |serve| serve.mut_arg("policy", |arg| arg.required(false)));
    let Ok(matches) = probe.try_get_matches_from(argv.iter()) else {
        // Help, a version, or an error: the final parse says it, as without a configuration.
        return Ok(argv);
    };
    let Some(("serve", given)) = matches.subcommand() else { return Ok(argv) };
    let serve = command.find_subcommand("serve").expect("`remit serve` exists").clone();
    let file = match given.get_one::<PathBuf>("config") {
        Some(path) => Some(read_file(path)?),
        None => None,
    };
    let mut flags: Vec<OsString> = Vec::new();
    let mut positionals: Vec<OsString> = Vec::new();
    for arg in serve.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(key) =
            arg.get_long().map(str::to_string).or_else(|| arg.is_positional().then(|| id.replace('_', "-")))
        else {
            continue;
        };
        if key == "config" || arg.is_hide_set() {
            continue;
        }
        // Set on the command line, or by a variable clap reads itself (`REMIT_ADMIN_TOKEN`…): that wins.
        if matches!(given.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable)) {
            continue;
        }
        let variable = variable(&key);
        let values = if let Some(value) = env(&variable) {
            let value = value.into_string().map_err(|_| format!("${variable} is not UTF-8"))?;
            let values = from_variable(arg, &value).map_err(|e| format!("${variable}: {e}"))?;
            check(arg, &values).map_err(|e| format!("${variable}: {e}"))?;
            values
        } else if let Some((path, table)) = &file {
            let Some(value) = table.get(&key).or_else(|| table.get(&key.replace('-', "_"))) else { continue };
            let at = || format!("`{}`, key `{key}`", path.display());
            let mut values = from_toml(arg, value).map_err(|e| format!("{}: {e}", at()))?;
            if PATH_KEYS.contains(&key.as_str()) || key == "store" {
                let folder = path.parent().unwrap_or(Path::new("."));
                values = values.into_iter().map(|v| relative_to(folder, &key, v)).collect();
            }
            check(arg, &values).map_err(|e| format!("{}: {e}", at()))?;
            values
        } else {
            continue;
        };
        if arg.is_positional() {
            positionals.extend(values.into_iter().map(OsString::from));
        } else if matches!(arg.get_action(), ArgAction::SetTrue) {
            if values.iter().any(|v| v == "true") {
                flags.push(format!("--{key}").into());
            }
        } else {
            flags.extend(values.into_iter().map(|v| OsString::from(format!("--{key}={v}"))));
        }
    }
    if let Some((path, table)) = &file {
        for key in table.keys() {
            let known = serve.get_arguments().any(|arg| {
                let name = arg.get_long().map(str::to_string).unwrap_or_else(|| arg.get_id().as_str().to_string());
                !arg.is_hide_set() && name != "config" && (name == *key || name.replace('-', "_") == *key)
            });
            if !known {
                return Err(format!(
                    "`{}`: unknown key `{key}`: the keys are the flags of `remit serve` without their dashes \
                     (`remit serve --help`); a password is `store-password-file` or $REMIT_STORE_PASSWORD",
                    path.display()
                ));
            }
        }
    }
    // The file's settings go right after `serve` (before a `--` the command line may have); its policy at the end.
    let at = argv.iter().position(|a| a == "serve").expect("the subcommand is on the command line");
    let mut out: Vec<OsString> = argv[..=at].to_vec();
    out.extend(flags);
    out.extend(argv[at + 1..].iter().cloned());
    if !positionals.is_empty() {
        if !out.iter().any(|a| a == "--") {
            out.push("--".into());
        }
        out.extend(positionals);
    }
    Ok(out)
}

/// The variable of a key: `REMIT_` and the key in capitals, dashes as underscores.
pub fn variable(key: &str) -> String {
    format!("REMIT_{}", key.to_ascii_uppercase().replace('-', "_"))
}

/// The file's table (its keys with dashes), or an error naming the file and the line.
fn read_file(path: &Path) -> Result<(PathBuf, toml::Table), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the configuration `{}`: {e}", path.display()))?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map(|span| text[..span.start].lines().count().max(1));
        let place = line.map(|l| format!(", line {l}")).unwrap_or_default();
        format!("`{}`{place}: {}", path.display(), e.message().trim().replace('\n', "; "))
    })?;
    for (key, value) in &table {
        if value.is_table() {
            return Err(format!(
                "`{}`: `[{key}]` is a table: the keys are top-level, `remit serve`'s flags without their dashes",
                path.display()
            ));
        }
    }
    Ok((path.to_path_buf(), table))
}

/// Whether `arg` takes several values (repeatable, or a list of positionals).
fn many(arg: &clap::Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Append)
        || (arg.is_positional() && arg.get_num_args().is_some_and(|n| n.max_values() > 1))
}

/// A key's TOML value as the flag's values: a string, a number or a boolean as written; an array for a repeatable
/// flag (a single value is a list of one).
fn from_toml(arg: &clap::Arg, value: &toml::Value) -> Result<Vec<String>, String> {
    let flag = matches!(arg.get_action(), ArgAction::SetTrue);
    let one = |value: &toml::Value| -> Result<String, String> {
        match value {
            toml::Value::String(s) if !flag => Ok(s.clone()),
            toml::Value::Integer(n) if !flag => Ok(n.to_string()),
            toml::Value::Float(n) if !flag => Ok(n.to_string()),
            toml::Value::Boolean(b) if flag => Ok(b.to_string()),
            _ if flag => Err(format!("is `true` or `false`, not {}", describe(value))),
            _ => Err(format!("is a string or a number, not {}", describe(value))),
        }
    };
    match value {
        toml::Value::Array(items) if many(arg) => items.iter().map(one).collect(),
        toml::Value::Array(_) => Err("takes one value, not a list".into()),
        value => Ok(vec![one(value)?]),
    }
}

fn describe(value: &toml::Value) -> String {
    format!("{} `{value}`", value.type_str())
}

/// A variable's value as the flag's values: one value (a repeatable flag gets a list of one, as clap's own
/// variables `REMIT_ADMIN_TOKEN`… do); a switch is `true`/`1`/`yes` or `false`/`0`/`no`/empty.
fn from_variable(arg: &clap::Arg, value: &str) -> Result<Vec<String>, String> {
    if !matches!(arg.get_action(), ArgAction::SetTrue) {
        return Ok(vec![value.to_string()]);
    }
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Ok(vec!["true".into()]),
        "false" | "0" | "no" | "" => Ok(vec!["false".into()]),
        _ => Err(format!("`{value}` is not `true` or `false`")),
    }
}

/// Checks the values with the flag's own parser (`duration`, a number's range, a list of choices): clap parses
/// them for a command of this flag alone, so the reason is clap's, and the caller names where they came from.
fn check(arg: &clap::Arg, values: &[String]) -> Result<(), String> {
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return Ok(());
    }
    let alone = arg.clone().required(false).requires(Resettable::Reset).env(Resettable::Reset);
    let args: Vec<String> = match arg.get_long() {
        Some(long) => values.iter().map(|v| format!("--{long}={v}")).collect(),
        None => values.to_vec(),
    };
    let parsed = Command::new("remit serve").no_binary_name(true).arg(alone).try_get_matches_from(args);
    parsed.map(|_| ()).map_err(|e| {
        // clap's message up to its blank line (the reason and the possible values; not "For more information").
        let text = e.to_string();
        let lines: Vec<&str> = text.lines().map(str::trim).take_while(|l| !l.is_empty()).collect();
        lines.join(" ").trim_start_matches("error: ").to_string()
    })
}

/// `value` of a path key, relative to `folder` when it is a relative path (`sqlite:` kept for `store`).
fn relative_to(folder: &Path, key: &str, value: String) -> String {
    let (prefix, path) = match (key, value.strip_prefix("sqlite:")) {
        ("store", Some(path)) => ("sqlite:", path.to_string()),
        ("store", None) => return value,
        // libpq's word for the platform's roots, not a file.
        ("store-ssl-root-cert", _) if value == "system" => return value,
        _ => ("", value),
    };
    if Path::new(&path).is_absolute() || folder.as_os_str().is_empty() {
        return format!("{prefix}{path}");
    }
    format!("{prefix}{}", folder.join(path).display())
}
