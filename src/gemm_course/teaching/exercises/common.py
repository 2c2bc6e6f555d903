"""What every check shares: the marker of an unanswered exercise and the way a check is attempted."""

from __future__ import annotations

NOT_ANSWERED = "not answered yet"


def unanswered(answer) -> bool:
    """Whether ``answer`` is still the exercise's placeholder: ``...`` itself, or a function whose
    body does nothing but return ``None`` or ``...`` (``def f(x): ...``, ``return ...``, a
    docstring or comments beside it), the way the chapters hand out a function to write."""
    import dis

    if answer is ...:
        return True
    code = getattr(answer, "__code__", None)
    if code is None:
        return False
    body = [ins for ins in dis.get_instructions(code) if ins.opname not in ("RESUME", "NOP", "CACHE")]
    if len(body) == 1 and body[0].opname == "RETURN_CONST":  # Python 3.12: one instruction
        return body[0].argval is None or body[0].argval is ...
    return (len(body) == 2 and body[0].opname == "LOAD_CONST" and body[1].opname == "RETURN_VALUE"
            and (body[0].argval is None or body[0].argval is ...))


def attempt(check, *answers, **options):
    """Run ``check(*answers, **options)`` and print its verdict.

    An answer still ``...``, or a function still to be written (its body only ``...``), is "not
    answered yet": nothing is checked and that is printed instead of a verdict. Returns True
    (right), False (wrong, or the reader's code raised: the hint or the error is printed) or None
    (not answered yet), so a notebook cell with an unanswered exercise still runs.
    """
    if any(unanswered(a) for a in answers):
        print(f"{check.__name__}: {NOT_ANSWERED}. Replace each ... with your answer (or write the function's body) "
              "and run the cell again.")
        return None
    try:
        print(check(*answers, **options))
        return True
    except AssertionError as e:
        print(f"{check.__name__}: {e}")
        return False
    except Exception as e:  # the reader's code raised: report it like a wrong answer
        if any(callable(a) for a in answers):
            print(f"{check.__name__}: your code raised {type(e).__name__}: {e}")
        else:  # a value of the wrong kind (an int for a tuple, ...): say what the check could not do with it
            print(f"{check.__name__}: your answer could not be checked ({type(e).__name__}: {e}); is it the kind of "
                  "value the exercise asks for (a tuple, an int, ...: see the comment beside its ...)? If it is, the "
                  "error is the check's own.")
        return False
