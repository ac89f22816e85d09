#!/usr/bin/env node
// A Node.js agent that speaks supervise's protocol through `supervise notify`.
//
// Node's standard library has no unix datagram socket and cannot pass the
// barrier's file descriptor, so this agent does not speak the socket
// itself: it runs `supervise-notify EVENT ...` (or `supervise notify
// EVENT ...`, the same client) for each marker (child_process.spawnSync),
// the route for any language. By default the client waits until supervise has journaled the marker (a
// barrier) and its exit status is the answer: 0 journaled, 1 not
// delivered or not confirmed (supervise refused it, or went away), 2 a
// usage error. --timeout bounds the wait, so a stopped supervise never
// hangs the agent. Outside supervise ($NOTIFY_SOCKET unset) it sends
// nothing and exits 0, so the agent runs the same without one.
//
// Standard library only. Usage:
//
//   supervise run -- node agent.js [flags]
//   supervise chaos --at tool-end -- node agent.js --turns 0 --out /tmp/node-agent.out
//
// Flags:
//   --session ID        the session id (default "node")
//   --turns N           how many fresh turns to run (default 1; 0: until stopped)
//   --out FILE          the file the side-effecting tool appends to (default node-agent.out)
//   --tool-time MS      how long the tool runs before its side effect (default 20)
//   --think-time MS     how long the model "thinks" around the tool (default 10)
//   --phase-barrier=false
//                       send the markers after the tool's side effect (effect, phase
//                       model) without waiting for them to be journaled (--barrier=false);
//                       the default waits for each. The markers before a side effect
//                       (turn-begin, phase tool, resumed) and turn-end always wait.
//   --supervise PATH    run `PATH notify EVENT ...`: the supervise binary (default
//                       $SUPERVISE_BIN; with neither, `supervise-notify EVENT ...` when
//                       supervise-notify is on PATH, else `supervise notify EVENT ...`)
//   --timeout DUR       `supervise notify --timeout` (default 5s)
//
// Each fresh turn tN (numbered by a counter file next to --out, persisted
// before the turn begins, so a relaunched agent never reuses a turn id):
// turn-begin, phase model, phase tool (journaled before the side effect),
// the side effect (a line appended to --out, synced), effect (its key, so
// a resume lists it as done), phase model, turn-end completed.
//
// Started with $SUPERVISE_RESUME_FILE (supervise relaunched it after it
// died mid-turn), it first takes every resume owed: it reports resumed,
// skips the side effect when the resume's "effects" lists it (or the world
// shows it done: the line is in --out), does it otherwise, and ends the
// turn. Only then does it run fresh turns.
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const path = require('path');

class NotifyError extends Error {}

function parseArgs(argv) {
  const o = {
    session: 'node', turns: 1, out: 'node-agent.out', toolTime: 20, thinkTime: 10,
    phaseBarrier: true, supervise: process.env.SUPERVISE_BIN || '', timeout: '5s',
  };
  const num = (name, v) => {
    if (!/^[0-9]+$/.test(v || '')) throw new Error(`${name}: want a whole number, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    let [flag, value] = argv[i].split(/=(.*)/s, 2);
    const next = () => {
      if (value !== undefined) return value;
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    switch (flag) {
      case '--session': o.session = next(); break;
      case '--turns': o.turns = num(flag, next()); break;
      case '--out': o.out = next(); break;
      case '--tool-time': o.toolTime = num(flag, next()); break;
      case '--think-time': o.thinkTime = num(flag, next()); break;
      case '--phase-barrier':
        if (value !== undefined && value !== 'true' && value !== 'false') throw new Error('--phase-barrier: want true or false');
        o.phaseBarrier = value !== 'false';
        break;
      case '--no-phase-barrier': o.phaseBarrier = false; break;
      case '--supervise': o.supervise = next(); break;
      case '--timeout': o.timeout = next(); break;
      default: throw new Error(`unknown flag ${flag}`);
    }
  }
  return o;
}

// client is the program and the words before EVENT that send a marker:
// `SUPERVISE notify` when a supervise binary was named, else
// supervise-notify when it is on PATH (the same client as `supervise
// notify` in a binary that starts faster, docs/performance.md), else
// `supervise notify`.
function client(supervise) {
  if (supervise) return { bin: supervise, words: ['notify'] };
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const p = path.join(dir || '.', 'supervise-notify');
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return { bin: p, words: [] };
    } catch (e) {
      // not here
    }
  }
  return { bin: 'supervise', words: ['notify'] };
}

function sleep(ms) {
  if (ms > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

class Agent {
  constructor(o) {
    this.o = o;
    this.client = client(o.supervise);
  }

  // notify runs `supervise-notify EVENT FLAGS...` or `supervise notify
  // EVENT FLAGS...` (this.client). With barrier (the default of the
  // client) it returns once supervise has journaled
  // the marker; exit status 1 means it was not (do not go on to a side
  // effect a resume could not account for). Without, it only waits (at
  // most a second) until supervise has read it.
  notify(event, flags, barrier = true) {
    // Not under supervise: `supervise notify` would send nothing and exit
    // 0; skip the process start.
    if (!process.env.NOTIFY_SOCKET) return;
    const { bin, words } = this.client;
    const args = [...words, event, ...flags, '--timeout', this.o.timeout];
    if (!barrier) args.push('--barrier=false');
    const what = [bin, ...words, event].join(' ');
    const r = childProcess.spawnSync(bin, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.error) throw new NotifyError(`running ${what}: ${r.error.message}`);
    if (r.status !== 0) {
      const how = r.status === null ? `signal ${r.signal}` : `exit status ${r.status}`;
      throw new NotifyError(`${what} did not confirm (${how})`);
    }
  }

  effectKey(session, turn) {
    return `append:${session}/${turn}`;
  }

  effectDone(session, turn) {
    let text;
    try {
      text = fs.readFileSync(this.o.out, 'utf8');
    } catch (e) {
      if (e.code === 'ENOENT') return false;
      throw e;
    }
    const key = this.effectKey(session, turn) + ' ';
    return text.split('\n').some((line) => line.startsWith(key));
  }

  // The side effect: one line appended to --out, synced.
  effect(session, turn, prompt) {
    const fd = fs.openSync(this.o.out, 'a', 0o644);
    try {
      fs.writeSync(fd, `${this.effectKey(session, turn)} ${prompt}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }

  // tool runs the side-effecting tool: its phase is journaled first, so a
  // death from here on resumes "inside append", whose effect is unknown;
  // then the effect is declared, so a resume lists it as done.
  tool(session, turn, prompt, takes) {
    this.notify('phase', ['--session', session, '--phase', 'tool', '--tool', 'append', '--detail', `append to ${path.basename(this.o.out)}`]);
    sleep(takes);
    this.effect(session, turn, prompt);
    this.notify('effect', ['--session', session, '--key', this.effectKey(session, turn)], this.o.phaseBarrier);
    this.notify('phase', ['--session', session, '--phase', 'model'], this.o.phaseBarrier);
  }

  // nextTurn returns the next turn number and persists the one after it
  // (synced, replaced by rename) before the turn begins.
  nextTurn() {
    const file = this.o.out + '.next';
    let n = 1;
    try {
      n = parseInt(fs.readFileSync(file, 'utf8'), 10) || 1;
    } catch (e) {
      if (e.code !== 'ENOENT') throw e;
    }
    const tmp = file + '.tmp';
    const fd = fs.openSync(tmp, 'w', 0o644);
    try {
      fs.writeSync(fd, `${n + 1}\n`);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
    return n;
  }

  turn() {
    const session = this.o.session;
    const turn = `t${this.nextTurn()}`;
    const prompt = `append line ${turn}`;
    this.notify('turn-begin', ['--session', session, '--turn', turn, '--prompt', prompt]);
    this.notify('phase', ['--session', session, '--phase', 'model'], this.o.phaseBarrier);
    sleep(this.o.thinkTime);
    this.tool(session, turn, prompt, this.o.toolTime);
    sleep(this.o.thinkTime);
    // Always journaled before the next turn or an exit: an exit with a
    // turn supervise believes open counts as a death mid-turn.
    this.notify('turn-end', ['--session', session, '--turn', turn, '--outcome', 'completed']);
    console.log(`turn ${turn} completed`);
  }

  // resumes are the sessions supervise owes a resume: a list of
  // {session, turn, attempt, reason, phase, tool, prompt, message, effects}.
  resumes() {
    const file = process.env.SUPERVISE_RESUME_FILE || '';
    if (file === '') return [];
    let items;
    try {
      items = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      if (e.code === 'ENOENT') return [];
      throw e;
    }
    if (!Array.isArray(items)) throw new Error(`${file}: not a list of resumes`);
    return items;
  }

  resume(item) {
    const session = String(item.session || '');
    const turn = String(item.turn || '');
    if (session === '') throw new Error('a resume without a session');
    const turnFlag = turn === '' ? [] : ['--turn', turn];
    // Journaled: a second death from now on counts against this turn.
    this.notify('resumed', ['--session', session, ...turnFlag]);
    console.log(`resumed ${session} ${turn} after ${item.reason} in phase ${item.phase}`);
    const effects = Array.isArray(item.effects) ? item.effects : [];
    if (effects.includes(this.effectKey(session, turn)) || this.effectDone(session, turn)) {
      console.log('  the tool\'s effect is already done: not repeating it');
    } else {
      this.tool(session, turn, String(item.prompt || ''), 0);
    }
    this.notify('turn-end', ['--session', session, ...turnFlag, '--outcome', 'completed']);
  }

  run() {
    for (const item of this.resumes()) this.resume(item);
    for (let done = 0; this.o.turns === 0 || done < this.o.turns; done++) this.turn();
  }
}

function main() {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`agent.js: ${e.message}\n`);
    return 2;
  }
  try {
    new Agent(o).run();
  } catch (e) {
    process.stderr.write(`agent.js: ${e.message}\n`);
    return 1;
  }
  return 0;
}

process.exitCode = main();
