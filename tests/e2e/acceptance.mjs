// The shared acceptance test (shared/acceptance.mjs, a copy of the project's
// ../shared/e2b/acceptance.mjs, committed so that a fresh clone has it) against a private daemon,
// its result turned into TAP: one check per acceptance check, by the names it prints, and one for
// its summary and exit status. The checks it has are read from its own source, so a check that
// never ran (the script stopped early) is a failure, not a silence.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { start, done, ok, is, skip, todo, diag, env, ROOT } from './harness.mjs'

// A check whose feature is not built yet would be named here (harness.mjs, PENDING); while every
// runCode check is, the script runs with E2B_NO_CODE_INTERPRETER=1.
const PENDING = {}

await start({ pending: PENDING, budgetMs: 120_000 })
const script = join(ROOT, 'tests', 'e2e', 'shared', 'acceptance.mjs')
const names = [...readFileSync(script, 'utf8').matchAll(/check\('([^']+)'/g)].map((m) => m[1])
ok(names.length >= 15, `the acceptance script has its checks (${names.length})`)
const interp = names.filter((x) => x.startsWith('runCode'))
const skipInterp = process.env.HUTCH_E2E_RUN_PENDING !== '1' && interp.every((x) => x in PENDING)

const child = spawn(process.execPath, [script], {
  cwd: join(ROOT, 'tests', 'e2e'),
  env: {
    ...process.env,
    E2B_API_KEY: env.key,
    E2B_API_URL: env.url,
    E2B_SANDBOX_URL: env.url,
    ...(skipInterp ? { E2B_NO_CODE_INTERPRETER: '1' } : {}),
  },
  stdio: ['ignore', 'pipe', 'pipe'],
})
let out = ''
let err = ''
child.stdout.on('data', (d) => (out += d))
child.stderr.on('data', (d) => (err += d))
const timer = setTimeout(() => child.kill('SIGKILL'), 100_000)
const status = await new Promise((res) => child.on('close', (code, sig) => res(sig ?? code)))
clearTimeout(timer)

const seen = new Map() // name -> the script's line
for (const l of out.split('\n')) {
  const m = /^(ok  |FAIL) (.*)$/.exec(l)
  if (!m) continue
  const name = names.find((x) => m[2] === x || m[2].startsWith(x + ' - '))
  if (name) seen.set(name, { pass: m[1] === 'ok  ', line: l })
}
for (const name of names) {
  const why = PENDING[name]
  const r = seen.get(name)
  if (why !== undefined && !r) {
    skip(`acceptance: ${name}`, `pending: ${why}`)
    continue
  }
  if (why !== undefined) {
    todo(r.pass, `acceptance: ${name}`, `pending: ${why}`)
    continue
  }
  ok(r?.pass, `acceptance: ${name}`, r ? r.line : 'it did not run')
}
// Pending checks that ran (HUTCH_E2E_RUN_PENDING=1) and failed are in its count, and its status.
const pendingFailed = names.filter((x) => x in PENDING && seen.get(x)?.pass === false).length
const summary = /^(\d+) passed, (\d+) failed$/m.exec(out)
const wantPassed = names.length - (skipInterp ? interp.length : 0) - pendingFailed
is(summary && `${summary[1]} passed, ${summary[2]} failed`, `${wantPassed} passed, ${pendingFailed} failed`, 'acceptance: its summary')
if (!is(status, pendingFailed ? 1 : 0, `acceptance: it exits ${pendingFailed ? 1 : 0}`)) diag(out, err)
await done()
