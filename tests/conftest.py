"""Set-up shared by the whole suite."""

import signal

# Several tests send SIGINT to a child process and expect Ctrl-C's behaviour there.  A shell starts
# background jobs with SIGINT ignored and children inherit that (a Python started so never raises
# KeyboardInterrupt): give this process the usual handler back, so its children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
