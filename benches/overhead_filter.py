# The trivial --script filter of the overhead harness: keep every event.
# (Hook names follow the --script API; a script that defines a hook it does not call is
# harmless, so both spellings under discussion are here.)


def on_event(event):
    return True


def filter_event(event):
    return True
