# The R side of the R kernel: r_kernel.py starts it as
#     Rscript --vanilla r_kernel.R REQUEST_FD REPLY_FD
# and speaks repl_driver.py's requests and frames with it (R has no JSON of its own; they need
# none).
# fds 1 and 2 are pipes the driver reads: whatever R or a child writes there is the execution's
# output. Everything here lives in an environment of its own, not the user's global one, and
# finds base R before the global environment: a user's own `print` or `switch` changes nothing
# here.
local(envir = new.env(parent = baseenv()), {
    args <- commandArgs(trailingOnly = TRUE)
    req_con <- file(sprintf("/dev/fd/%s", args[[1]]), open = "r", raw = TRUE)
    rep_con <- file(sprintf("/dev/fd/%s", args[[2]]), open = "wb", raw = TRUE)

    # A sandbox's env may have no locale: R would then write non-ASCII text as <U+00E9>.
    if (!isTRUE(l10n_info()[["UTF-8"]])) invisible(Sys.setlocale("LC_CTYPE", "C.UTF-8"))
    # Functions print as they were written, as in R's interactive REPL.
    options(keep.source = TRUE)
    # Plots: R's default device (when the code opens none) is a PNG file per page in a
    # directory of ours; at the end of the execution each page is a display result (png), as
    # IRkernel shows plots. (R's non-interactive default would be Rplots.pdf in the user's cwd.)
    plot_dir <- tempfile("hutch-r-plots-")
    dir.create(plot_dir, mode = "0700")
    plot_devices <- integer(0)
    options(device = function(...) {
        grDevices::png(file.path(plot_dir, "plot%03d.png"), width = 7, height = 7, units = "in",
                       res = 96, type = "cairo")
        plot_devices <<- c(plot_devices, grDevices::dev.cur())
    })
    close_plots <- function() {
        for (d in intersect(plot_devices, grDevices::dev.list())) grDevices::dev.off(d)
        plot_devices <<- integer(0)
        sort(list.files(plot_dir, full.names = TRUE))
    }
    send_plots <- function(seq) {
        for (f in close_plots()) {
            send("display", seq, readBin(f, "raw", file.size(f)))
            unlink(f)
        }
    }
    # what an interrupted execution drew is dropped
    discard_plots <- function() unlink(close_plots())

    # A frame to the driver; a field is a string (sent as UTF-8) or raw bytes.
    send <- function(kind, ...) {
        fields <- lapply(list(...), function(s) {
            if (is.raw(s)) s else charToRaw(enc2utf8(paste(as.character(s), collapse = "\n")))
        })
        header <- paste(c(kind, vapply(fields, length, 1L)), collapse = " ")
        writeBin(c(charToRaw(paste0(header, "\n")), unlist(fields, use.names = FALSE)), rep_con)
        flush(rep_con)
    }

    # A request field: the hex of its UTF-8, "-" if empty (NA if it holds a NUL, which R
    # strings cannot).
    unhex <- function(h) {
        if (h == "-") return("")
        n <- nchar(h)
        bytes <- as.raw(strtoi(substring(h, seq.int(1L, n, 2L), seq.int(2L, n, 2L)), 16L))
        if (any(bytes == as.raw(0L))) return(NA_character_)
        s <- rawToChar(bytes)
        Encoding(s) <- "UTF-8"
        s
    }

    # The next request line split at its spaces; R ends at the end of the requests.
    next_request <- function() {
        line <- readLines(req_con, n = 1L)
        if (!length(line)) quit(save = "no", status = 0)
        strsplit(line, " ", fixed = TRUE)[[1]]
    }

    # Until the driver's line KIND SEQ; other lines are spares of an interrupted wait.
    wait_for <- function(kind, seq) {
        repeat {
            parts <- next_request()
            if (identical(parts, c(kind, seq))) return(invisible())
        }
    }

    # User code runs as eval(expr, .GlobalEnv) inside run_user(): a condition whose call is that
    # eval came from the top level of the cell, where R's REPL names no call.
    top_call <- quote(eval(expr, .GlobalEnv))
    run_user <- function(expr) eval(expr, .GlobalEnv)
    shown_call <- function(cond) {
        call <- conditionCall(cond)
        if (is.null(call) || identical(call, top_call)) NULL else call
    }

    # The user's frames of sys.calls() taken where an error was signalled: those under
    # run_user's eval, without R's own error-handling frames at the end.
    user_frames <- function(calls) {
        at <- 0L
        for (i in seq_along(calls)) {
            if (identical(calls[[i]][[1L]], quote(run_user))) at <- i
        }
        calls <- if (at > 0L) calls[-seq_len(at)] else list()
        while (length(calls) && identical(calls[[1L]], top_call)) calls <- calls[-1L]
        n <- length(calls)
        if (n >= 2L && identical(calls[[n - 1L]][[1L]], quote(.handleSimpleError))) {
            calls <- calls[seq_len(n - 2L)]
        } else if (n >= 1L) {
            calls <- calls[seq_len(n - 1L)]  # the calling handler's own frame
        }
        calls
    }

    on_warning <- function(w) {
        call <- shown_call(w)
        text <- if (is.null(call)) {
            sprintf("Warning message:\n%s\n", conditionMessage(w))
        } else {
            sprintf("Warning message:\nIn %s : %s\n", deparse(call, nlines = 1L)[[1L]], conditionMessage(w))
        }
        cat(text, file = stderr())
        invokeRestart("muffleWarning")
    }

    error_text <- function(e) {
        call <- shown_call(e)
        if (is.null(call)) paste0("Error: ", conditionMessage(e))
        else paste0("Error in ", deparse(call, nlines = 1L)[[1L]], ": ", conditionMessage(e))
    }

    # A value printed as R's REPL prints it: show() for an S4 object, a call of print() in the
    # global environment for another object (so that the user's print methods are found),
    # print.default for the rest.
    print_value <- function(value) {
        if (isS4(value)) methods::show(value)
        else if (is.object(value)) eval(quote(print(x)), list(x = value), .GlobalEnv)
        else print.default(value)
    }

    # One top-level expression, as R's REPL runs it: its value printed when visible, as a
    # result. FALSE if it raised.
    run_one <- function(seq, expr, main) {
        frames <- list()
        outcome <- tryCatch(withCallingHandlers({
            v <- withVisible(run_user(expr))
            if (v$visible) {
                text <- utils::capture.output(print_value(v$value))
                send("result", seq, if (main) "1" else "0", paste(text, collapse = "\n"))
                # the driver has read the output written so far: what follows comes after
                wait_for("ack", seq)
            }
            TRUE
        }, warning = on_warning, error = function(e) frames <<- user_frames(sys.calls())),
        error = function(e) e)
        if (isTRUE(outcome)) return(TRUE)
        value <- error_text(outcome)
        trace <- vapply(seq_along(frames), function(i) {
            paste0(i, ". ", paste(deparse(frames[[i]], nlines = 5L), collapse = "\n   "))
        }, "")
        traceback <- if (length(trace)) c(value, "Traceback:", trace) else value
        send("error", seq, "ERROR", value, paste(traceback, collapse = "\n"))
        FALSE
    }

    run_code <- function(seq, code) {
        if (is.na(code)) {
            send("error", seq, "ERROR", "Error: the code holds a NUL character", "")
            return()
        }
        exprs <- tryCatch(parse(text = code, keep.source = TRUE), error = function(e) e)
        if (inherits(exprs, "error")) {
            msg <- paste0("Error: ", conditionMessage(exprs))
            send("error", seq, "ERROR", msg, msg)
            return()
        }
        n <- length(exprs)
        for (i in seq_len(n)) {
            if (!run_one(seq, exprs[[i]], i == n)) break
        }
        send_plots(seq)
    }

    # env_vars for one execution: set, then put back as they were (removed if they were unset).
    set_env <- function(vars) {
        if (!length(vars)) return(character(0))
        names <- unlist(vars[c(TRUE, FALSE)])
        values <- unlist(vars[c(FALSE, TRUE)])
        saved <- Sys.getenv(names, unset = NA, names = TRUE)
        do.call(Sys.setenv, structure(as.list(values), names = names))
        saved
    }
    restore_env <- function(saved) {
        for (name in names(saved)) {
            if (is.na(saved[[name]])) Sys.unsetenv(name)
            else do.call(Sys.setenv, structure(list(saved[[name]]), names = name))
        }
    }

    # An execution goes through these phases, one step() each (repl_driver.py says why):
    #   idle   reading the next request       run    the user's code
    #   done   telling the driver so          fence  waiting for its fence
    #   flush  clearing interrupts sent before the fence
    #   end    env vars put back, the end sent
    # A SIGINT raises an interrupt wherever R is. on_interrupt() makes of it what the phase
    # says, and the phase's step runs again where that is safe: a step's last act is to move
    # on, so a step that is cut short is a step not done.
    state <- new.env()
    state$phase <- "idle"

    step <- function() {
        switch(state$phase,
            idle = {
                parts <- next_request()
                # what is not an exec is a spare ack or fence of an interrupted execution
                if (length(parts) >= 3L && parts[[1]] == "exec" && length(parts) %% 2L == 1L) {
                    state$seq <- parts[[2]]
                    fields <- lapply(parts[-(1:2)], unhex)
                    state$saved <- set_env(fields[-1])
                    state$code <- fields[[1]]
                    state$phase <- "run"
                    send("started", state$seq)  # from here the driver forwards SIGINT
                    run_code(state$seq, state$code)
                    state$phase <- "done"
                }
            },
            done = {
                send("done", state$seq)  # from here it sends none
                state$phase <- "fence"
            },
            fence = {
                parts <- next_request()
                if (identical(parts, c("fence", state$seq))) state$phase <- "flush"
            },
            flush = {
                Sys.sleep(0)  # raises the interrupt of a SIGINT that came before the fence
                state$phase <- "end"
            },
            end = {
                discard_plots()
                restore_env(state$saved)
                send("end", state$seq)
                state$phase <- "idle"
            })
    }

    on_interrupt <- function(i) {
        switch(state$phase,
            run = {
                send("error", state$seq, "KeyboardInterrupt", "interrupted", "")
                state$phase <- "done"
            },
            fence = send("again", state$seq),  # it may have cost us the fence: another
            NULL)  # done, flush, end: the step again; idle: no SIGINT is sent there
    }

    send("ready", R.version.string)
    # An interrupt between two steps (outside the inner tryCatch) is the outer one's.
    repeat tryCatch(repeat tryCatch(step(), interrupt = on_interrupt), interrupt = on_interrupt)
})
quit(save = "no", status = 0)
