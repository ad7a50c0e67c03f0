// The VS Code extension: the TextMate grammar and language configuration are declared in package.json; this file
// starts `remit lsp` (diagnostics as you type, hover, go to definition, references, completion, symbols) over stdio
// for every `.remit` file, and restarts it when its settings change.
import * as vscode from "vscode";
import { LanguageClient, TransportKind, type LanguageClientOptions, type ServerOptions } from "vscode-languageclient/node";
import { serverCommand, type ServerSettings } from "./server";

let client: LanguageClient | undefined;

function settings(): ServerSettings {
  const config = vscode.workspace.getConfiguration("remit.server");
  return { path: config.get<string>("path"), extraArgs: config.get<string[]>("extraArgs") };
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const { command, args } = serverCommand(settings());
  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "remit" }, { scheme: "untitled", language: "remit" }],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*.remit") },
  };
  client = new LanguageClient("remit", "remit language server", serverOptions, clientOptions);
  context.subscriptions.push(client);
  await client.start();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("remit.server")) return;
      await client?.stop();
      await start(context);
    }),
  );
  await start(context);
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
