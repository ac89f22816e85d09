// The bench's Node.js agent for the `node` rows: under supervise, it runs
// `supervise notify` once per marker with child_process.spawnSync, as
// examples/node/agent.js does, and times each call from just before the
// spawn to the reaped exit (exec, package init, the send, supervise's
// commit and, by default, the barrier's answer). Interleaved: the same
// marker with --barrier=false (which still waits, at most a second, until
// supervise has read it) and /bin/true spawned the same way (the floor of
// any process start from Node here). Writes BENCH_OUT.json and "done" to
// BENCH_OUT.
'use strict';

const { spawnSync } = require('child_process');
const fs = require('fs');

const sv = process.env.BENCH_SUPERVISE;
const truth = process.env.BENCH_TRUE_BIN;
const n = Number(process.env.BENCH_MARKERS || '100');
const out = process.env.BENCH_OUT;

function timed(cmd, args) {
  const start = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ns = Number(process.hrtime.bigint() - start);
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit status ${r.status}: ${r.stderr}`);
  return ns;
}

const res = { barrier_ns: [], no_barrier_ns: [], true_ns: [] };
timed(sv, ['notify', 'turn-begin', '--session', 'bench', '--turn', 't1']);
for (let i = 0; i < n; i++) {
  const phase = i % 2 === 0 ? 'tool' : 'model';
  res.barrier_ns.push(timed(sv, ['notify', 'phase', '--session', 'bench', '--phase', phase, '--timeout', '5s']));
  res.no_barrier_ns.push(timed(sv, ['notify', 'phase', '--session', 'bench', '--phase', phase, '--barrier=false', '--timeout', '5s']));
  res.true_ns.push(timed(truth, []));
}
timed(sv, ['notify', 'turn-end', '--session', 'bench', '--turn', 't1', '--outcome', 'completed']);
fs.writeFileSync(out + '.json', JSON.stringify(res));
fs.appendFileSync(out, 'done\n');
