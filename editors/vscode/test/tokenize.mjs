// Tokenizes .remit files with the extension's TextMate grammar through a real TextMate engine (vscode-textmate on
// vscode-oniguruma, as VS Code itself does) and writes one token snapshot per file:
//
//   node test/tokenize.mjs OUT_DIR FILE...
//
// OUT_DIR/<file path with / as __>.tokens lists each line and its tokens with their scopes (without the root
// `source.remit`; whitespace-only tokens left out). It also checks what a snapshot alone would not catch, and exits
// 1 listing every problem: a word of the language (every keyword literal of grammar/remit.pest) left unscoped in code,
// an `invalid.*` scope, or a `//` comment not scoped as a comment.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const textmate = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const here = dirname(fileURLToPath(import.meta.url));
const extension = join(here, "..");
const repository = join(extension, "../..");

const [outDir, ...files] = process.argv.slice(2);
if (!outDir || files.length === 0) {
  process.stderr.write("usage: tokenize.mjs OUT_DIR FILE...\n");
  process.exit(2);
}

const wasm = readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm")).buffer;
await oniguruma.loadWASM(wasm);
const registry = new textmate.Registry({
  onigLib: Promise.resolve({
    createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
    createOnigString: (s) => new oniguruma.OnigString(s),
  }),
  loadGrammar: async (scopeName) => {
    if (scopeName !== "source.remit") return null;
    const path = join(extension, "syntaxes/remit.tmLanguage.json");
    return textmate.parseRawGrammar(readFileSync(path, "utf8"), path);
  },
});
const grammar = await registry.loadGrammar("source.remit");

const pest = readFileSync(join(repository, "grammar/remit.pest"), "utf8");
const keywords = new Set([...pest.matchAll(/"([a-z][a-z_]*)"/g)].map((m) => m[1]));

const problems = [];
mkdirSync(outDir, { recursive: true });
for (const file of files) {
  const name = relative(repository, file).split("/").join("__");
  const lines = readFileSync(file, "utf8").split("\n");
  if (lines.at(-1) === "") lines.pop();
  const out = [];
  let state = textmate.INITIAL;
  lines.forEach((line, i) => {
    const { tokens, ruleStack } = grammar.tokenizeLine(line, state);
    state = ruleStack;
    out.push(`${String(i + 1).padStart(3)}| ${line}`);
    for (const token of tokens) {
      const text = line.slice(token.startIndex, token.endIndex);
      const scopes = token.scopes.filter((s) => s !== "source.remit");
      if (text.trim() === "" && scopes.length === 0) continue;
      out.push(`     ${JSON.stringify(text)} ${scopes.join(" ") || "-"}`);
      const at = `${relative(repository, file)}:${i + 1}:${token.startIndex + 1}`;
      if (scopes.length === 0) {
        for (const word of text.match(/[a-z_][a-z_0-9]*/g) ?? []) {
          if (keywords.has(word)) problems.push(`${at}: the keyword \`${word}\` is not scoped (in ${JSON.stringify(text)})`);
        }
      }
      if (scopes.some((s) => s.startsWith("invalid."))) problems.push(`${at}: ${JSON.stringify(text)} is scoped invalid`);
      if (text.includes("//") && !scopes.some((s) => s.startsWith("comment.") || s.startsWith("string."))) {
        problems.push(`${at}: a comment not scoped as one: ${JSON.stringify(text)}`);
      }
    }
  });
  writeFileSync(join(outDir, `${name}.tokens`), out.join("\n") + "\n");
}
if (problems.length > 0) {
  process.stderr.write(problems.join("\n") + "\n");
  process.exit(1);
}
