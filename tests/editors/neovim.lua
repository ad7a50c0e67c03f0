-- A real editor as the language server's client: Debian's neovim (0.7), headless. Opens the policy given in
-- $POLICY, starts `$REMIT lsp`, misspells a tool, waits for the diagnostic, asks for a hover and a definition,
-- and writes what it saw to $OUT as JSON for tests/lsp.rs to check.
local remit, policy, out = os.getenv("REMIT"), os.getenv("POLICY"), os.getenv("OUT")
vim.cmd("edit " .. policy)
local buf = vim.api.nvim_get_current_buf()
local client = vim.lsp.start_client({ name = "remit", cmd = { remit, "lsp" }, root_dir = vim.fn.fnamemodify(policy, ":h") })
vim.lsp.buf_attach_client(buf, client)
vim.wait(10000, function() return vim.lsp.get_client_by_id(client).initialized end, 20)

local row
for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if line:find("allow add_to_cart", 1, true) then row = i - 1 end
end
vim.api.nvim_buf_set_lines(buf, row, row + 1, false, { "  allow add_to_crt" })
local got = vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 20)
local diagnostics = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(diagnostics, { code = d.code, message = d.message, lnum = d.lnum, col = d.col })
end

local uri = vim.uri_from_bufnr(buf)
local col
for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  local c = line:find("allow make_payment", 1, true)
  if c then row, col = i - 1, c + 6 end
end
local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover", { textDocument = { uri = uri }, position = { line = row, character = col } }, 5000)
local definition = vim.lsp.buf_request_sync(buf, "textDocument/definition", { textDocument = { uri = uri }, position = { line = row, character = col } }, 5000)
local function first(responses)
  for _, r in pairs(responses or {}) do
    if r.result then return r.result end
  end
end

local file = io.open(out, "w")
file:write(vim.fn.json_encode({ got = got, diagnostics = diagnostics, hover = first(hover), definition = first(definition) }))
file:close()
vim.lsp.stop_client(client)
vim.cmd("qa!")
