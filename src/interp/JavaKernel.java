// The Java side of the Java kernel: java_kernel.py starts it (source-file mode) as
//     java --add-opens java.base/java.util=ALL-UNNAMED JavaKernel.java REQUEST_FD REPLY_FD
// and speaks repl_driver.py's requests and frames with it. The user's snippets run in this JVM
// through the JShell API with its local execution engine, so System.out and System.err are this
// process's fds 1 and 2, the pipes the driver reads.
import java.io.*;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.LinkedBlockingQueue;
import jdk.jshell.*;
import jdk.jshell.execution.LocalExecutionControlProvider;

public class JavaKernel {
    // jshell's own start-up imports (its DEFAULT script), which jshell users expect.
    static final List<String> IMPORTS = List.of("java.io", "java.math", "java.net", "java.nio.file",
            "java.util", "java.util.concurrent", "java.util.function", "java.util.prefs",
            "java.util.regex", "java.util.stream");

    final BufferedReader requests;
    final OutputStream replies;
    final JShell shell;
    final LinkedBlockingQueue<List<String>> execs = new LinkedBlockingQueue<>();
    // Set by the reader thread when a stop request comes: the execution ends with
    // KeyboardInterrupt at its next snippet, if the one running did not end on its own.
    volatile boolean stopAsked;
    // An execution is queued or running (set by the reader thread, cleared by the main one).
    volatile boolean executing;
    // The process environment's backing map, written by env_vars (null: not writable here).
    final Map<String, String> writableEnv = openEnvironment();

    JavaKernel(String requestFd, String replyFd) throws IOException {
        requests = new BufferedReader(new InputStreamReader(new FileInputStream("/proc/self/fd/" + requestFd),
                StandardCharsets.US_ASCII));
        replies = new FileOutputStream("/proc/self/fd/" + replyFd);
        // Unbuffered: each print reaches the pipe when it is made, not when a buffer fills. A
        // subclass ({}), because PrintStream's own println writes the line and its newline in
        // one write, a subclass's in two, as IJava streams them ("hi", then "\n").
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8) {});
        System.setErr(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8) {});
        System.setIn(InputStream.nullInputStream());
        shell = JShell.builder()
                .executionEngine(new LocalExecutionControlProvider(), Map.of())
                .out(System.out).err(System.err).in(System.in)
                .build();
    }

    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        JavaKernel k = new JavaKernel(args[0], args[1]);
        // E2B's Java contexts give the sandbox's env vars as system properties
        // (System.getProperty("X")); a property Java already has keeps its value.
        for (Map.Entry<String, String> e : System.getenv().entrySet()) {
            if (System.getProperty(e.getKey()) == null) System.setProperty(e.getKey(), e.getValue());
        }
        // one snippet each (eval takes one); this also warms javac up before the first execution
        for (String p : IMPORTS) k.shell.eval("import " + p + ".*;");
        k.send("ready", "Java " + System.getProperty("java.version") + ", jshell up in "
                + (System.nanoTime() - t0) / 1000000 + " ms"
                + (k.writableEnv == null ? "; env_vars only as system properties" : ""));
        Thread reader = new Thread(k::readRequests, "hutch-requests");
        reader.setDaemon(true);
        reader.start();
        while (true) {
            List<String> fields = k.execs.take();
            if (fields.isEmpty()) break;  // the end of the requests
            k.execute(fields);
        }
        System.exit(0);  // also ends threads the user's code left running
    }

    // --- frames (repl_driver.py)

    void send(String kind, String... fields) throws IOException {
        byte[][] data = new byte[fields.length][];
        StringBuilder header = new StringBuilder(kind);
        for (int i = 0; i < fields.length; i++) {
            data[i] = fields[i].getBytes(StandardCharsets.UTF_8);
            header.append(' ').append(data[i].length);
        }
        ByteArrayOutputStream frame = new ByteArrayOutputStream();
        frame.write(header.append('\n').toString().getBytes(StandardCharsets.US_ASCII));
        for (byte[] d : data) frame.write(d);
        replies.write(frame.toByteArray());
        replies.flush();
    }

    void readRequests() {
        try {
            // a request line: KIND SEQ FIELD..., each field the hex of its UTF-8 ("-": empty)
            for (String line; (line = requests.readLine()) != null; ) {
                String[] parts = line.split(" ", -1);
                if (parts[0].equals("stop")) {
                    stopAsked = true;
                    // JShell.stop() only stops a snippet that is running: one that was being
                    // compiled when the stop came starts after it, so stop again until the
                    // execution is over (it starts no snippet once stopAsked is set).
                    while (executing) {
                        shell.stop();
                        Thread.sleep(20);
                    }
                } else if (parts[0].equals("exec") && parts.length >= 3 && parts.length % 2 == 1) {
                    List<String> fields = new ArrayList<>();
                    fields.add(parts[1]);
                    for (int i = 2; i < parts.length; i++) fields.add(unhex(parts[i]));
                    // set here, not when the main thread takes it: a stop that comes right
                    // behind the exec is then never lost
                    stopAsked = false;
                    executing = true;
                    execs.put(fields);
                } else {
                    throw new IOException("an unknown request: " + parts[0]);
                }
            }
        } catch (Exception e) {
            e.printStackTrace();  // on fd 2: the driver reports it as the execution's stderr
        }
        execs.add(List.of());
    }

    static String unhex(String hex) {
        if (hex.equals("-")) return "";
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }

    // --- executions

    void execute(List<String> fields) throws IOException {
        String seq = fields.get(0);
        String code = fields.get(1);
        Map<String, String> savedEnv = new HashMap<>(), savedProps = new HashMap<>();
        for (int i = 2; i + 1 < fields.size(); i += 2) {
            String name = fields.get(i), value = fields.get(i + 1);
            if (!savedProps.containsKey(name)) {
                savedEnv.put(name, System.getenv(name));
                savedProps.put(name, System.getProperty(name));
            }
            System.setProperty(name, value);
            if (writableEnv != null) writableEnv.put(name, value);
        }
        try {
            run(seq, code);
        } catch (RuntimeException e) {
            // the JShell API itself failed: report it, keep the session
            send("error", seq, "KernelError", String.valueOf(e), stackTrace(e));
        } finally {
            for (Map.Entry<String, String> e : savedProps.entrySet()) {
                restoreProperty(e.getKey(), e.getValue());
                if (writableEnv != null) restoreEnv(writableEnv, e.getKey(), savedEnv.get(e.getKey()));
            }
            executing = false;
            send("end", seq);
        }
    }

    static void restoreProperty(String name, String value) {
        if (value == null) System.clearProperty(name); else System.setProperty(name, value);
    }

    static void restoreEnv(Map<String, String> env, String name, String value) {
        if (value == null) env.remove(name); else env.put(name, value);
    }

    // The snippets of the code one by one, as jshell reads them; the value of the last, when
    // it is an expression, is the result (as IJava shows it: a String without its quotes).
    void run(String seq, String code) throws IOException {
        SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
        String remaining = code;
        String value = null;
        while (true) {
            if (stopAsked) {
                send("error", seq, "KeyboardInterrupt", "interrupted", "");
                return;
            }
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(remaining);
            if (!info.completeness().isComplete()) {
                if (info.completeness() != SourceCodeAnalysis.Completeness.EMPTY) {
                    String rest = info.remaining().trim();
                    send("error", seq, "IncompleteSourceException", rest, "Incomplete input:\n" + rest);
                    return;
                }
                break;
            }
            remaining = info.remaining();
            value = null;
            for (SnippetEvent event : shell.eval(info.source())) {
                if (event.causeSnippet() != null) continue;  // a dependent snippet's update
                if (stopAsked) {
                    send("error", seq, "KeyboardInterrupt", "interrupted", "");
                    return;
                }
                if (event.exception() != null) {
                    sendException(seq, event.exception());
                    return;
                }
                if (!event.status().isDefined()) {
                    sendCompileError(seq, event.snippet());
                    return;
                }
                value = display(event);
            }
        }
        if (value != null) send("result", seq, "1", value);
    }

    static String display(SnippetEvent event) {
        Snippet s = event.snippet();
        String v = event.value();
        if (v == null) return null;
        String type;
        switch (s.subKind()) {
            case VAR_VALUE_SUBKIND:
            case OTHER_EXPRESSION_SUBKIND:
                type = ((ExpressionSnippet) s).typeName();
                break;
            case TEMP_VAR_EXPRESSION_SUBKIND:
                type = ((VarSnippet) s).typeName();
                break;
            default:
                return null;  // declarations, assignments, statements: no value shown
        }
        if (type.equals("void")) return null;
        boolean primitive = Set.of("boolean", "byte", "char", "short", "int", "long", "float", "double").contains(type);
        if (!primitive && v.equals("null")) return null;  // IJava shows nothing for null
        // jshell quotes a value that is a String or a Character at run time, whatever the
        // expression's type (Object o = "x"; o): such a literal is shown unquoted. (An object
        // whose toString() is itself quoted text loses its quotes: jshell's value is the same.)
        boolean quoted = v.length() >= 2 && v.charAt(0) == v.charAt(v.length() - 1)
                && (v.charAt(0) == '"' || (v.charAt(0) == '\'' && (v.length() == 3 || v.charAt(1) == '\\')));
        return quoted && (!primitive || type.equals("char")) ? unquote(v) : v;
    }

    // jshell gives a String or char value as a Java literal: "a\nb" -> a, newline, b.
    static String unquote(String literal) {
        StringBuilder out = new StringBuilder();
        String s = literal.substring(1, literal.length() - 1);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\' || i + 1 >= s.length()) {
                out.append(c);
                continue;
            }
            char e = s.charAt(++i);
            switch (e) {
                case 'b': out.append('\b'); break;
                case 't': out.append('\t'); break;
                case 'n': out.append('\n'); break;
                case 'f': out.append('\f'); break;
                case 'r': out.append('\r'); break;
                case 'u':
                    if (i + 4 < s.length()) {
                        out.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                        i += 4;
                    }
                    break;
                default:
                    if (e >= '0' && e <= '7') {
                        int j = i;
                        while (j < s.length() && j < i + 3 && s.charAt(j) >= '0' && s.charAt(j) <= '7') j++;
                        out.append((char) Integer.parseInt(s.substring(i, j), 8));
                        i = j - 1;
                    } else {
                        out.append(e);  // \" \' \\
                    }
            }
        }
        return out.toString();
    }

    void sendException(String seq, JShellException e) throws IOException {
        if (e instanceof EvalException) {
            EvalException ee = (EvalException) e;
            String name = ee.getExceptionClassName();
            String message = ee.getMessage() == null ? "" : ee.getMessage();
            // jshell's EvalException stands in for the user's exception: its trace under the
            // real exception's name
            String trace = stackTrace(ee).replaceFirst("^jdk\\.jshell\\.EvalException", name);
            send("error", seq, name, message, trace);
        } else if (e instanceof UnresolvedReferenceException) {
            DeclarationSnippet d = ((UnresolvedReferenceException) e).getSnippet();
            String message = "Attempt to use definition snippet with unresolved references: "
                    + String.join(", ", shell.unresolvedDependencies(d).toArray(String[]::new));
            send("error", seq, "UnresolvedReferenceException", message, message + "\n" + d.source());
        } else {
            send("error", seq, e.getClass().getSimpleName(), String.valueOf(e.getMessage()), stackTrace(e));
        }
    }

    void sendCompileError(String seq, Snippet snippet) throws IOException {
        List<String> messages = new ArrayList<>();
        StringBuilder trace = new StringBuilder(snippet.source().strip()).append('\n');
        shell.diagnostics(snippet).forEach(d -> {
            // javac's "location: class" line names jshell's wrapper class, nothing of the user's
            String m = d.getMessage(Locale.ROOT).lines().filter(l -> !l.strip().startsWith("location:"))
                    .collect(java.util.stream.Collectors.joining("\n"));
            messages.add(m);
            long at = d.getStartPosition();
            trace.append(at >= 0 ? "at character " + at + ": " : "").append(m).append('\n');
        });
        if (messages.isEmpty() && snippet instanceof DeclarationSnippet) {
            String deps = String.join(", ", shell.unresolvedDependencies((DeclarationSnippet) snippet).toArray(String[]::new));
            messages.add("unresolved dependencies: " + deps);
            trace.append("unresolved dependencies: ").append(deps).append('\n');
        }
        if (messages.isEmpty()) messages.add("the snippet was rejected");
        send("error", seq, "CompilationException", String.join("\n", messages), trace.toString());
    }

    static String stackTrace(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString().stripTrailing();
    }

    // The map behind System.getenv(), writable, so that an execution's env_vars are seen by
    // System.getenv and inherited by the processes it starts (ProcessBuilder copies it). Java
    // has no API for it: this needs java.util opened to us (--add-opens), else null.
    @SuppressWarnings("unchecked")
    static Map<String, String> openEnvironment() {
        try {
            Map<String, String> env = System.getenv();  // Collections.UnmodifiableMap
            Field m = env.getClass().getDeclaredField("m");
            m.setAccessible(true);
            return (Map<String, String>) m.get(env);
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("JavaKernel: env_vars will be system properties only: " + e);
            return null;
        }
    }
}
