// How the extension starts the language server: `remit lsp` over stdio. Kept free of the `vscode` module so that it
// can be tested outside the editor (tests/editor.rs runs it under plain Node).

export interface ServerSettings {
  /** `remit.server.path`: the `remit` binary (a name on PATH or a path). */
  path?: string;
  /** `remit.server.extraArgs`: added after `lsp`. */
  extraArgs?: string[];
}

export interface ServerCommand {
  command: string;
  args: string[];
}

/** The command line of the language server for the user's settings. */
export function serverCommand(settings: ServerSettings): ServerCommand {
  const path = settings.path?.trim();
  return { command: path ? path : "remit", args: ["lsp", ...(settings.extraArgs ?? [])] };
}
