// Figure 7 peer (c): the scripted three-tool conversation run by the Vercel
// AI SDK's generateText loop with the SDK's own mock language model.
//
// Usage: node run.mjs [--runs N] [--warmup K] [--stream]
//
// With --stream it plays the streaming conversation with streamText: the
// mock model streams each call's arguments (which then carry a note) in
// 8-byte chunks and the answer in 1-byte deltas (bench/peers/README.md).
//
// Prints one JSON line on stdout:
//   {"peer":"ai-sdk","version":"<ai version>","runtime":"<node version>",
//    "runs":N,"seconds":S,"runs_per_sec":R,"ns_per_run":X}
// Exits 1 when a run does not follow the script (wrong tool order or
// arguments, a tool not run exactly once, a final answer other than "done"),
// 2 on bad arguments, 3 when Node.js is too old.

const MIN_NODE_MAJOR = 18; // the engines floor of ai@6

const nodeMajor = Number(process.versions.node.split('.')[0]);
if (!(nodeMajor >= MIN_NODE_MAJOR)) {
  process.stderr.write(
    `ai-sdk peer: Node.js ${process.versions.node} is too old; ` +
      `ai@6 needs Node.js >= ${MIN_NODE_MAJOR}\n`,
  );
  process.exit(3);
}

// Imported only after the version check so that an old Node.js gets the
// message above rather than a syntax or module error from the SDK.
const { createRequire } = await import('node:module');
const { generateText, streamText, tool, stepCountIs } = await import('ai');
const { MockLanguageModelV3, convertArrayToReadableStream } = await import('ai/test');
const { z } = await import('zod');

const aiVersion = createRequire(import.meta.url)('ai/package.json').version;

function usage(msg) {
  process.stderr.write(`ai-sdk peer: ${msg}\nusage: node run.mjs [--runs N] [--warmup K] [--stream]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { runs: 1000, warmup: 100, stream: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--stream') {
      opts.stream = true;
      continue;
    }
    let [flag, value] = argv[i].split(/=(.*)/s, 2);
    if (flag !== '--runs' && flag !== '--warmup') usage(`unknown argument ${argv[i]}`);
    if (value === undefined) value = argv[++i];
    if (value === undefined || !/^\d+$/.test(value)) usage(`${flag} needs a non-negative integer`);
    opts[flag.slice(2)] = Number(value);
  }
  if (opts.runs < 1) usage('--runs must be at least 1');
  return opts;
}

// The script: each model turn is chosen by how many tool results the prompt
// already holds, the same rule the Go peers use.
const SCRIPT = [
  { tool: 'noop_a', n: 1 },
  { tool: 'noop_b', n: 2 },
  { tool: 'noop_c', n: 3 },
];
const FINAL_TEXT = 'done';
const MODEL_CALLS_PER_RUN = SCRIPT.length + 1;

const usageFigures = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

function countToolResults(prompt) {
  let seen = 0;
  for (const message of prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result') seen++;
    }
  }
  return seen;
}

// The streaming conversation: the calls' arguments carry a note and come
// in STREAM_ARG_CHUNK-byte chunks, the answer in STREAM_TEXT_DELTA-byte
// deltas.
const STREAM_ARG_CHUNK = 8;
const STREAM_TEXT_DELTA = 1;
const streamedNote = (n) => `call ${n} of 3, streamed in 8-byte chunks`;
const streamedInput = (n) => JSON.stringify({ n, note: streamedNote(n) });

function cut(s, n) {
  const out = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

// streamParts is the stream of the turn for prompt, as a provider streams
// it: tool input deltas then the call, or text deltas; then finish.
function streamParts(prompt) {
  const seen = countToolResults(prompt);
  const parts = [{ type: 'stream-start', warnings: [] }];
  if (seen < SCRIPT.length) {
    const turn = SCRIPT[seen];
    const id = `call_${seen + 1}`;
    const input = streamedInput(turn.n);
    parts.push({ type: 'tool-input-start', id, toolName: turn.tool });
    for (const delta of cut(input, STREAM_ARG_CHUNK)) parts.push({ type: 'tool-input-delta', id, delta });
    parts.push({ type: 'tool-input-end', id });
    parts.push({ type: 'tool-call', toolCallId: id, toolName: turn.tool, input });
    parts.push({ type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: usageFigures });
    return parts;
  }
  parts.push({ type: 'text-start', id: 'text' });
  for (const delta of cut(FINAL_TEXT, STREAM_TEXT_DELTA)) parts.push({ type: 'text-delta', id: 'text', delta });
  parts.push({ type: 'text-end', id: 'text' });
  parts.push({ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: usageFigures });
  return parts;
}

const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => ({ stream: convertArrayToReadableStream(streamParts(prompt)) }),
  doGenerate: async ({ prompt }) => {
    const seen = countToolResults(prompt);
    if (seen < SCRIPT.length) {
      const turn = SCRIPT[seen];
      return {
        content: [
          {
            type: 'tool-call',
            toolCallId: `call_${seen + 1}`,
            toolName: turn.tool,
            input: JSON.stringify({ n: turn.n }),
          },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: usageFigures,
        warnings: [],
      };
    }
    return {
      content: [{ type: 'text', text: FINAL_TEXT }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: usageFigures,
      warnings: [],
    };
  },
});

// Calls per tool in the current run, and arguments that broke the script.
const calls = { noop_a: 0, noop_b: 0, noop_c: 0 };
let badInput = null;

function noop(name, want) {
  return tool({
    description: `no-op tool ${name}`,
    inputSchema: z.object({ n: z.number().int(), note: z.string().optional() }),
    execute: async ({ n, note }) => {
      calls[name]++;
      if (n !== want && badInput === null) badInput = `${name} got n=${n}, want ${want}`;
      if (streaming && note !== streamedNote(want) && badInput === null) badInput = `${name} got note ${JSON.stringify(note)}`;
      return { ok: true };
    },
  });
}

const tools = {
  noop_a: noop('noop_a', 1),
  noop_b: noop('noop_b', 2),
  noop_c: noop('noop_c', 3),
};

function fail(run, msg) {
  process.stderr.write(`ai-sdk peer: run ${run}: ${msg}\n`);
  process.exit(1);
}

// answer plays the conversation: generateText, or with --stream
// streamText, reading the answer's deltas as they come.
async function answer(run) {
  const options = {
    model,
    tools,
    prompt: 'run the three tools',
    stopWhen: stepCountIs(10), // above the 4 scripted steps: the text turn ends the loop
    maxRetries: 0,
  };
  if (!streaming) return (await generateText(options)).text;
  const result = streamText({ ...options, onError: ({ error }) => fail(run, `stream error: ${error}`) });
  let text = '';
  let deltas = 0;
  for await (const delta of result.textStream) {
    text += delta;
    deltas++;
  }
  if (deltas !== FINAL_TEXT.length / STREAM_TEXT_DELTA) fail(run, `answer in ${deltas} deltas`);
  return text;
}

async function runOnce(run) {
  calls.noop_a = calls.noop_b = calls.noop_c = 0;
  badInput = null;
  model.doGenerateCalls.length = 0; // the mock records every call; keep memory flat
  model.doStreamCalls.length = 0;

  const text = await answer(run);

  if (text !== FINAL_TEXT) fail(run, `final answer ${JSON.stringify(text)}, want "done"`);
  if (badInput !== null) fail(run, badInput);
  for (const name of Object.keys(calls)) {
    if (calls[name] !== 1) fail(run, `tool ${name} ran ${calls[name]} times, want 1`);
  }
  const modelCalls = streaming ? model.doStreamCalls.length : model.doGenerateCalls.length;
  if (modelCalls !== MODEL_CALLS_PER_RUN) fail(run, `model called ${modelCalls} times, want ${MODEL_CALLS_PER_RUN}`);
}

const { runs, warmup, stream: streaming } = parseArgs(process.argv.slice(2));

for (let i = 0; i < warmup; i++) await runOnce(-(i + 1));

const start = process.hrtime.bigint();
for (let i = 0; i < runs; i++) await runOnce(i);
const elapsedNs = Number(process.hrtime.bigint() - start);

const seconds = elapsedNs / 1e9;
process.stdout.write(
  JSON.stringify({
    peer: streaming ? 'ai-sdk-stream' : 'ai-sdk',
    version: aiVersion,
    runtime: `node ${process.versions.node}`,
    runs,
    seconds,
    runs_per_sec: runs / seconds,
    ns_per_run: elapsedNs / runs,
  }) + '\n',
);
