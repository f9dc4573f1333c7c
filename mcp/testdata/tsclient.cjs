// Drives a Polyweave MCP server with the official TypeScript SDK client.
// Usage: node tsclient.cjs stdio DIR COMMAND [ARGS...] | node tsclient.cjs http DIR URL
// DIR is the served workspace folder. Prints one JSON report on stdout;
// the Go test (mcp/tsclient_test.go) asserts on it.
const fs = require('node:fs');
const path = require('node:path');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [mode, dir, ...target] = process.argv.slice(2);

function text(res) {
  return (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// Processes whose command line contains marker, across pid namespaces.
function running(marker) {
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (fs.readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(marker)) return true;
    } catch {}
  }
  return false;
}

async function until(what, cond, ms = 15000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function main() {
  const transport = mode === 'stdio'
    ? new StdioClientTransport({ command: target[0], args: target.slice(1), stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(target[0]));
  const client = new Client({ name: 'polyweave-ts-test', version: '1.0.0' });
  await client.connect(transport);
  const report = {};

  const { tools } = await client.listTools();
  report.tools = tools.map((t) => ({ name: t.name, annotations: t.annotations, hasSchema: !!t.inputSchema }));

  // Each workspace tool.
  const write = await client.callTool({ name: 'write_file', arguments: { path: 'notes/hello.txt', content: 'hello from ts\n' } });
  const read = await client.callTool({ name: 'read_file', arguments: { path: 'notes/hello.txt' } });
  const run = await client.callTool({ name: 'run_command', arguments: { command: 'wc -c < notes/hello.txt' } });
  report.write = { isError: !!write.isError, structured: write.structuredContent };
  report.read = { isError: !!read.isError, structured: read.structuredContent };
  report.run = { isError: !!run.isError, structured: run.structuredContent };

  // A hostile path.
  const hostile = await client.callTool({ name: 'read_file', arguments: { path: '../../../etc/passwd' } });
  report.hostile = { isError: !!hostile.isError, text: text(hostile) };

  // A long command, cancelled: the client sends notifications/cancelled.
  const marker = `${process.pid}.4711`;
  const started = path.join(dir, 'started');
  const ac = new AbortController();
  const long = client.callTool({ name: 'run_command', arguments: { command: `sleep ${marker} & touch started; wait` } },
    undefined, { signal: ac.signal, timeout: 60000 }).then(() => 'answered', (e) => `rejected: ${e.message}`);
  await until('the long command to start', () => fs.existsSync(started) && running(marker));
  ac.abort('test cancels');
  report.cancelled = await long;
  const t0 = Date.now();
  await until('the cancelled command to die', () => !running(marker));
  report.killedAfterMs = Date.now() - t0;

  // 100 concurrent calls, each answered once with its own result.
  const calls = [];
  for (let i = 0; i < 100; i++) {
    calls.push(client.callTool({ name: 'write_file', arguments: { path: `many/${i}.txt`, content: String(i) } }));
  }
  const results = await Promise.all(calls);
  report.concurrent = results.map((r, i) => !r.isError && r.structuredContent && r.structuredContent.path === `many/${i}.txt`)
    .filter(Boolean).length;

  await client.close();
  console.log(JSON.stringify(report));
}

main().catch((e) => { console.error(e); process.exit(1); });
