// The code interpreter through `@e2b/code-interpreter` (pinned in package.json): runCode's state
// across calls, streaming, results of each kind (values, display(), matplotlib PNG and charts,
// DataFrames, PIL images), errors, env_vars, contexts (create with cwd, list, restart, remove,
// two that share nothing), interrupts by the client's timeout, a kernel that dies, each
// language, and variables kept through a pause and a resume.
import { Sandbox } from '@e2b/code-interpreter'
import { NotFoundError, TimeoutError } from 'e2b'
import { start, done, test, assert, eq, match, rejects, sleep } from './harness.mjs'

const PENDING = {}

await start({ pending: PENDING, budgetMs: 600_000, env: { HUTCH_POOL: '1' } })
const sbx = await Sandbox.create({ envs: { SANDBOX_VAR: 'from-create' }, timeoutMs: 600_000 })
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const isPng = (b64) => typeof b64 === 'string' && Buffer.from(b64, 'base64').subarray(0, 8).equals(PNG)

await test('the default contexts: python and javascript, listed', async () => {
  const list = await sbx.listCodeContexts()
  const langs = list.map((c) => c.language).sort()
  assert(langs.includes('python') && langs.includes('javascript'), `languages ${langs}`)
  for (const c of list) match(c.id, /^[0-9a-f-]{36}$/, 'id')
})

await test('state across calls, the value of the last expression, execution counts', async () => {
  const a = await sbx.runCode('x = 1')
  eq(a.results.length, 0, 'an assignment has no result')
  eq(a.error, undefined, 'no error')
  const b = await sbx.runCode('x + 1')
  eq(b.text, '2', 'text')
  eq(b.results[0].isMainResult, true, 'isMainResult')
  assert(b.executionCount > a.executionCount, `executionCount ${a.executionCount} then ${b.executionCount}`)
  eq((await sbx.runCode("'abc'")).text, 'abc', 'a string value as E2B shows it')
  eq((await sbx.runCode('import os; os.environ["SANDBOX_VAR"]')).text, 'from-create', "the sandbox's env vars")
})

await test('stdout and stderr stream as they are printed', async () => {
  const seen = []
  const t0 = Date.now()
  const r = await sbx.runCode('import sys, time\nprint("first", flush=True)\ntime.sleep(1.5)\nprint("second")\nprint("oops", file=sys.stderr)', {
    onStdout: (m) => seen.push([Date.now() - t0, m.line]),
  })
  const end = Date.now() - t0
  eq(r.logs.stdout.join(''), 'first\nsecond\n', 'stdout')
  eq(r.logs.stderr.join(''), 'oops\n', 'stderr')
  assert(seen.length >= 1 && seen[0][1].startsWith('first'), `callbacks ${JSON.stringify(seen)}`)
  assert(end - seen[0][0] >= 1000, `the first line came ${seen[0][0]} ms in, the end ${end} ms`)
  eq((await sbx.runCode('!echo from-a-shell')).logs.stdout.join(''), 'from-a-shell\n', "a !cmd's output")
})

await test('errors: name, value, traceback; runCode does not throw', async () => {
  const r = await sbx.runCode('undefined_name + 1')
  eq(r.error?.name, 'NameError', 'name')
  match(r.error?.value, /undefined_name/, 'value')
  match(r.error?.traceback, /NameError/, 'traceback')
  eq((await sbx.runCode('x')).text, '1', 'the context lives on')
})

await test('display() and rich reprs: html, markdown, json', async () => {
  const r = await sbx.runCode('from IPython.display import display, HTML, Markdown\ndisplay(HTML("<b>hi</b>"))\ndisplay(Markdown("# t"))\n42')
  const html = r.results.find((x) => x.html)
  eq(html?.html, '<b>hi</b>', 'html')
  eq(html?.isMainResult, false, 'a display is not the main result')
  eq(r.results.find((x) => x.markdown)?.markdown, '# t', 'markdown')
  eq(r.text, '42', 'the main result after them')
  eq(JSON.stringify((await sbx.runCode("{'a': [1, 2]}")).results[0]?.json), '{"a":[1,2]}', 'a dict value: json')
  const list = (await sbx.runCode("[1, {'b': None}]")).results[0]
  eq(JSON.stringify(list?.json), '[1,{"b":null}]', 'a list value: json too, as E2B gives it')
  assert(list?.formats().includes('json'), `formats ${list?.formats()}`)
})

await test('matplotlib: a PNG and a chart with its numbers', async () => {
  const r = await sbx.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6], label="l")\nplt.title("T")\nplt.xlabel("X")\nplt.ylabel("Y")\nplt.show()'
  )
  eq(r.error, undefined, 'no error')
  const fig = r.results.find((x) => x.png)
  assert(fig, `results ${JSON.stringify(r.results.map((x) => Object.keys(x)))}`)
  assert(isPng(fig.png), 'the png is a PNG')
  eq(fig.chart?.type, 'line', 'chart type')
  eq(fig.chart?.title, 'T', 'chart title')
  eq(fig.chart?.x_label, 'X', 'x label')
  const pts = fig.chart?.elements?.[0]?.points
  assert(Array.isArray(pts) && pts.length === 3 && pts[2][1] === 6, `points ${JSON.stringify(pts)}`)
  eq((await sbx.runCode('import matplotlib.pyplot as plt; len(plt.get_fignums())')).text, '0', 'figures are closed after the cell')
})

await test('a pandas DataFrame: html, text and data', async () => {
  const r = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
  const df = r.results[0]
  match(df?.html, /<table/, 'html')
  match(df?.text, /a\s+b/, 'text')
  assert(df?.data && typeof df.data === 'object', `data ${JSON.stringify(df?.data)}`)
})

await test('a PIL image comes back as a PNG', async () => {
  const r = await sbx.runCode('from PIL import Image\nImage.new("RGB", (4, 4), "red")')
  assert(isPng(r.results[0]?.png), `results ${JSON.stringify(r.results.map((x) => Object.keys(x)))}`)
})

await test("the packages of E2B's template import; seaborn's figure comes back as a PNG", async () => {
  const mods = ['scipy', 'sympy', 'sklearn', 'seaborn', 'plotly', 'xarray', 'skimage', 'cv2', 'imageio',
    'soundfile', 'nltk', 'joblib', 'requests', 'aiohttp', 'bs4', 'tornado', 'tqdm', 'pytest', 'openpyxl',
    'xlrd', 'docx', 'pytz']
  const r = await sbx.runCode(`import importlib\nbad = []\nfor m in ${JSON.stringify(mods)}:\n    try: importlib.import_module(m)\n    except Exception as e: bad.append("%s: %r" % (m, e))\nbad`)
  eq(r.text, '[]', 'none failed')
  const s = await sbx.runCode('import seaborn as sns, pandas as pd\nsns.barplot(data=pd.DataFrame({"k": ["a", "b"], "v": [1, 2]}), x="k", y="v")')
  assert(s.results.some((x) => isPng(x.png)), `results ${JSON.stringify(s.results.map((x) => Object.keys(x)))}`)
})

await test("what a Jupyter user types daily: %timeit, %%time, obj?, !cmd, %%writefile, %env, %cd", async () => {
  const t = await sbx.runCode('%timeit -n 3 -r 1 sum(range(10))')
  match(t.logs.stdout.join(''), /per loop/, '%timeit')
  match((await sbx.runCode('%%time\nsum(range(10))')).logs.stdout.join(''), /Wall time/, '%%time')
  match((await sbx.runCode('len?')).logs.stdout.join(''), /Return the number of items/, 'obj?')
  eq((await sbx.runCode('!echo shell-$((6*7))')).logs.stdout.join(''), 'shell-42\n', '!cmd')
  eq((await sbx.runCode('out = !echo a; echo b')).error, undefined, 'out = !cmd')
  eq((await sbx.runCode('out')).text, "['a', 'b']", '... its lines')
  await sbx.runCode('%%writefile /tmp/written.txt\nhello')
  eq((await sbx.runCode('open("/tmp/written.txt").read()')).text, 'hello\\n', '%%writefile (the repr of its text)')
  await sbx.runCode('%env MAGIC_ENV=set')
  eq((await sbx.runCode('import os; os.environ["MAGIC_ENV"]')).text, 'set', '%env')
  await sbx.runCode('%cd /tmp')
  eq((await sbx.runCode('%pwd')).text, '/tmp', '%cd, %pwd')
  await sbx.runCode('%cd /home/user')
  eq((await sbx.runCode('input("name? ")')).error?.name, 'EOFError', 'input(): EOF at once, no hang')
})

await test('env_vars apply to one execution and are restored', async () => {
  const r = await sbx.runCode('import os; os.environ.get("ONE_RUN")', { envs: { ONE_RUN: 'yes' } })
  eq(r.text, 'yes', 'set for the run')
  eq((await sbx.runCode('import os; str(os.environ.get("ONE_RUN"))')).text, 'None', 'gone after it')
})

await test('contexts: cwd, no shared state, restart clears, remove', async () => {
  const c1 = await sbx.createCodeContext({ cwd: '/tmp' })
  eq(c1.language, 'python', 'language')
  eq(c1.cwd, '/tmp', 'cwd')
  eq((await sbx.runCode('import os; os.getcwd()', { context: c1 })).text, '/tmp', 'runs in its cwd')
  await sbx.runCode('secret = 7', { context: c1 })
  const c2 = await sbx.createCodeContext()
  eq((await sbx.runCode('secret', { context: c2 })).error?.name, 'NameError', 'another context does not see it')
  eq((await sbx.runCode('secret', { context: c1 })).text, '7', 'its own does')
  assert((await sbx.listCodeContexts()).some((c) => c.id === c1.id), 'listed')
  await sbx.restartCodeContext(c1)
  eq((await sbx.runCode('secret', { context: c1 })).error?.name, 'NameError', 'restart cleared it')
  await sbx.removeCodeContext(c1)
  await sbx.removeCodeContext(c2.id)
  assert(!(await sbx.listCodeContexts()).some((c) => c.id === c1.id), 'gone from the list')
  await rejects(sbx.runCode('1', { context: c1 }), NotFoundError, 'a removed context')
  await rejects(sbx.removeCodeContext('no-such-context'), NotFoundError, 'removing an unknown one')
})

await test('a client timeout interrupts the cell; the next one does not wait behind it', async () => {
  await sbx.runCode('kept = "yes"')
  await rejects(sbx.runCode('import time; time.sleep(300)', { timeoutMs: 1000 }), TimeoutError, 'the long cell')
  const t0 = Date.now()
  const r = await sbx.runCode('kept')
  eq(r.text, 'yes', 'state kept')
  assert(Date.now() - t0 < 10_000, `the next took ${Date.now() - t0} ms`)
})

await test('a kernel that dies is reported, and the context starts again', async () => {
  const r = await sbx.runCode('import os, signal; os.kill(os.getpid(), signal.SIGKILL)')
  assert(r.error, 'an error')
  match(`${r.error?.name} ${r.error?.value}`, /kernel/i, 'it says the kernel died')
  eq((await sbx.runCode('1 + 1')).text, '2', 'the context runs again')
})

await test('javascript: state, top-level await, import, the last value', async () => {
  const a = await sbx.runCode('const a = 5; let b = 2\nfunction f(x) { return x * a }', { language: 'js' })
  eq(a.error, undefined, 'no error')
  eq((await sbx.runCode('f(b)', { language: 'javascript' })).text, '10', 'declarations kept')
  eq((await sbx.runCode('await new Promise((r) => setTimeout(() => r(3), 10))', { language: 'js' })).text, '3', 'top-level await')
  const imp = await sbx.runCode("import { basename } from 'node:path'\nbasename('/a/b.txt')", { language: 'js' })
  eq(imp.text, 'b.txt', 'import')
  const log = await sbx.runCode('console.log("hi")', { language: 'js' })
  eq(log.logs.stdout.join(''), 'hi\n', 'console.log')
  eq((await sbx.runCode('nope()', { language: 'js' })).error?.name, 'ReferenceError', 'an error')
})

await test('typescript and bash contexts', async () => {
  const ts = await sbx.createCodeContext({ language: 'ts' })
  const t = await sbx.runCode('const n: number = 40\nn + 2', { context: ts })
  eq(t.text, '42', 'typescript')
  const sh = await sbx.createCodeContext({ language: 'bash' })
  await sbx.runCode('cd /tmp; V=9', { context: sh })
  eq((await sbx.runCode('echo "$PWD $V"', { context: sh })).logs.stdout.join(''), '/tmp 9\n', 'bash keeps cwd and variables')
})

await test('a create of code-interpreter-v1 takes a warm sandbox: its env vars, metadata, pandas at once', async () => {
  // the pool was filled after the first create, at the top of this file
  const t0 = Date.now()
  const warm = await Sandbox.create({ envs: { POOLED: 'yes' }, metadata: { from: 'pool' }, timeoutMs: 120_000 })
  const r = await warm.runCode('import os, pandas as pd\n(os.environ["POOLED"], pd.DataFrame({"a": [1, 2]}).shape)')
  const took = Date.now() - t0
  eq(r.text, "('yes', (2, 1))", 'env vars of the create, pandas imported')
  eq((await warm.getInfo()).metadata?.from, 'pool', 'metadata of the create')
  const listed = (await Sandbox.list().nextItems()).map((s) => s.sandboxId).sort()
  eq(listed, [sbx.sandboxId, warm.sandboxId].sort(), 'the list shows the two sandboxes made, not the pool')
  assert(took < 5000, `create and a first runCode took ${took} ms`)
  await warm.kill()
})

await test('variables live through a pause and a resume', async () => {
  await sbx.runCode('survivor = 123')
  await sbx.pause()
  const again = await Sandbox.connect(sbx.sandboxId)
  eq((await again.runCode('survivor')).text, '123', 'after the resume')
})

await done()
