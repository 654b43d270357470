#!/usr/bin/env node
// Asks RAGStack's AgentService a question over gRPC, with nothing but proto/ at run time.
//
//   node clients/node/ask.js --address HOST:PORT [--library L] [--mode hybrid] [--session S]
//                            [--top-k N] [--token T] [--timeout SECONDS] [--proto DIR] "question"
//
// Each event of the answer stream is reported on stderr as it arrives; the `done` event is
// printed on stdout as one JSON line. On a gRPC error: `ask: <STATUS_NAME>: <message>` on
// stderr and exit code 1 (2 for bad usage). `--token` (default: $RAGSTACK__SERVICES__TOKEN, as the
// services read it) is sent as `authorization: Bearer <token>`.
'use strict';

const path = require('node:path');
const { parseArgs } = require('node:util');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const USAGE =
  'usage: ask.js --address HOST:PORT [--library L] [--mode MODE] [--session S] [--top-k N]\n' +
  '              [--token T] [--timeout SECONDS] [--proto DIR] "question"';

function fail(message, code = 2) {
  process.stderr.write(`ask: ${message}\n${code === 2 ? USAGE + '\n' : ''}`);
  process.exit(code);
}

function parse() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        address: { type: 'string' },
        library: { type: 'string', default: '' },
        mode: { type: 'string', default: '' },
        session: { type: 'string', default: '' },
        'top-k': { type: 'string', default: '0' },
        token: { type: 'string', default: process.env.RAGSTACK__SERVICES__TOKEN || '' },
        timeout: { type: 'string', default: '300' },
        proto: { type: 'string', default: path.resolve(__dirname, '..', '..', 'proto') },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    return fail(err.message);
  }
}

// `hybrid`, `HYBRID` or `SEARCH_MODE_HYBRID`, checked against the enum in common.proto.
function searchMode(packageDefinition, mode) {
  if (!mode) return 'SEARCH_MODE_UNSPECIFIED';
  const names = packageDefinition['ragstack.v1.SearchMode'].type.value.map((v) => v.name);
  const name = mode.toUpperCase().replace(/-/g, '_');
  const full = name.startsWith('SEARCH_MODE_') ? name : `SEARCH_MODE_${name}`;
  if (!names.includes(full)) {
    const choices = names.map((n) => n.replace('SEARCH_MODE_', '').toLowerCase());
    fail(`unknown --mode ${mode} (one of: ${choices.join(', ')})`);
  }
  return full;
}

function describe(kind, event) {
  switch (kind) {
    case 'start':
      return `trace_id=${event.trace_id}`;
    case 'route':
      return `mode=${event.mode} by ${event.classifier}: ${event.reason}`;
    case 'tool_call':
      return `${event.tool} ${event.arguments_json} -> ${event.result_count} results`;
    case 'evidence':
      return `${event.hits.length} hits, grade=${event.grade}`;
    case 'delta':
      return JSON.stringify(event.text);
    case 'verification':
      return `${event.manifest.claims.length} claims, supported_ratio=${event.manifest.supported_ratio}`;
    case 'done':
      return `confidence=${event.confidence} abstained=${event.abstained} generator=${event.generator}`;
    default:
      return '';
  }
}

async function main() {
  const { values: opts, positionals } = parse();
  if (opts.help) {
    process.stdout.write(USAGE + '\n');
    return;
  }
  if (!opts.address) fail('--address is required');
  if (positionals.length !== 1) fail('give exactly one question (quote it)');
  const topK = Number(opts['top-k']);
  const timeout = Number(opts.timeout);
  if (!Number.isInteger(topK) || topK < 0) fail(`--top-k must be a whole number, not ${opts['top-k']}`);
  if (!(timeout > 0)) fail(`--timeout must be a positive number of seconds, not ${opts.timeout}`);

  const packageDefinition = protoLoader.loadSync('ragstack/v1/agent.proto', {
    includeDirs: [opts.proto],
    keepCase: true, // field names as in the .proto: trace_id, chunk_id...
    longs: String,
    enums: String, // enum values by name: SEARCH_MODE_HYBRID, VERDICT_SUPPORTED...
    defaults: true, // every field present in the JSON, even at its default
    oneofs: true, // `event` names which member of the oneof is set
  });
  const { AgentService } = grpc.loadPackageDefinition(packageDefinition).ragstack.v1;
  const client = new AgentService(opts.address, grpc.credentials.createInsecure());

  const metadata = new grpc.Metadata();
  if (opts.token) metadata.set('authorization', `Bearer ${opts.token}`);
  const request = {
    question: positionals[0],
    library: opts.library,
    mode: searchMode(packageDefinition, opts.mode),
    top_k: topK,
    session_id: opts.session,
  };
  const call = client.Ask(request, metadata, { deadline: Date.now() + timeout * 1000 });
  process.once('SIGINT', () => call.cancel());

  let done = null;
  try {
    for await (const response of call) {
      const kind = response.event;
      process.stderr.write(`${kind}: ${describe(kind, response[kind])}\n`);
      if (kind === 'done') done = response.done;
    }
  } catch (err) {
    const name = Object.keys(grpc.status).find((k) => grpc.status[k] === err.code) || `code ${err.code}`;
    process.stderr.write(`ask: ${name}: ${err.details || err.message}\n`);
    process.exitCode = 1;
    return;
  } finally {
    client.close();
  }
  if (done === null) {
    process.stderr.write('ask: the stream ended without a done event\n');
    process.exitCode = 1;
    return;
  }
  process.stdout.write(JSON.stringify(done) + '\n');
}

main().catch((err) => {
  process.stderr.write(`ask: ${err.stack || err}\n`);
  process.exitCode = 1;
});
