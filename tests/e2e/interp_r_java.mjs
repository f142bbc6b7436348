// The code interpreter's R and Java contexts through `@e2b/code-interpreter`, as E2B's own tests
// use them (js/tests/env_vars/r.test.ts, java.test.ts, cwd.test.ts, python's
// test_default_kernels.py): values as IRkernel and IJava show them, state, print, the sandbox's
// env vars and an execution's, cwd, errors, a plot, and an execution the client's timeout ends
// with the context's state kept. The kernels on their own: tests/interp/test_r_kernel.py and
// test_java_kernel.py.
import { Sandbox } from '@e2b/code-interpreter'
import { start, done, test, assert, eq } from './harness.mjs'
await start({ pending: {}, budgetMs: 300_000 })
const sbx = await Sandbox.create({ envs: { TEST_ENV_VAR: 'supertest' }, timeoutMs: 300_000 })
await test('r: values, state, print, env vars, cwd, errors, a plot, a timeout', async () => {
  const r = await sbx.runCode('x <- 1+1\nx', { language: 'r' })
  eq(r.results[0]?.text.trim(), '[1] 2', 'value'); eq(r.text, '[1] 2', 'text')
  eq((await sbx.runCode('x * 21', { language: 'r' })).results[0]?.text, '[1] 42', 'state')
  eq((await sbx.runCode('print("Hello, World!")', { language: 'r' })).logs.stdout, ['[1] "Hello, World!"\n'], 'print')
  eq((await sbx.runCode('Sys.getenv("TEST_ENV_VAR")', { language: 'r' })).results[0]?.text, '[1] "supertest"', 'sandbox env')
  eq((await sbx.runCode('Sys.getenv("FOO")', { language: 'r', envs: { FOO: 'bar' } })).results[0]?.text, '[1] "bar"', 'env')
  eq((await sbx.runCode('Sys.getenv("FOO", unset = "default")', { language: 'r' })).results[0]?.text, '[1] "default"', 'env restored')
  eq((await sbx.runCode('getwd()', { language: 'r' })).results[0]?.text, '[1] "/home/user"', 'cwd')
  const e = await sbx.runCode('stop("boom")', { language: 'r' })
  eq(e.error?.name, 'ERROR', 'error'); eq(e.error?.value, 'Error: boom', 'error value')
  const p = await sbx.runCode('plot(1:10)', { language: 'r' })
  assert(p.results[0]?.png?.length > 100, 'plot png')
  const t0 = Date.now()
  const slow = await sbx.runCode('Sys.sleep(30)', { language: 'r', timeoutMs: 2000 }).catch((err) => err)
  assert(slow instanceof Error, 'timeout error ' + slow)
  eq((await sbx.runCode('x', { language: 'r' })).results[0]?.text, '[1] 2', 'state after timeout ' + (Date.now() - t0))
})
await test('java: values, state, println, env vars as properties, cwd, errors, a timeout', async () => {
  const t0 = Date.now()
  const r = await sbx.runCode('int x = 1 + 1;\nx', { language: 'java' })
  eq(r.results[0]?.text, '2', 'value (first call ' + (Date.now() - t0) + ' ms)')
  eq((await sbx.runCode('x * 21', { language: 'java' })).text, '42', 'state')
  eq((await sbx.runCode('System.out.println("Hello, World!")', { language: 'java' })).logs.stdout[0], 'Hello, World!', 'println')
  eq((await sbx.runCode('System.getProperty("TEST_ENV_VAR")', { language: 'java' })).results[0]?.text, 'supertest', 'sandbox env')
  eq((await sbx.runCode('System.getProperty("FOO")', { language: 'java', envs: { FOO: 'bar' } })).results[0]?.text, 'bar', 'env')
  eq((await sbx.runCode('System.getProperty("FOO", "default")', { language: 'java' })).results[0]?.text, 'default', 'env restored')
  eq((await sbx.runCode('System.getProperty("user.dir")', { language: 'java' })).results[0]?.text, '/home/user', 'cwd')
  const e = await sbx.runCode('1/0', { language: 'java' })
  eq(e.error?.name, 'java.lang.ArithmeticException', 'error')
  const slow = await sbx.runCode('Thread.sleep(30000)', { language: 'java', timeoutMs: 2000 }).catch((err) => err)
  assert(slow instanceof Error, 'timeout error ' + slow)
  eq((await sbx.runCode('x', { language: 'java' })).text, '2', 'state after timeout')
})
await done()
