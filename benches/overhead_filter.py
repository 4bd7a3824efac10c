# The trivial --script filter of the overhead harness: look at every event, keep it.


def filter(event):
    return True
