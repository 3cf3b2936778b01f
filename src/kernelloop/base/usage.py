"""`UsageError`: a bad argument to the API, the CLI or a run's options (a ValueError naming what is wrong and what
would be accepted). Defined below every layer so the loop's own checks raise the same error the API documents."""

from __future__ import annotations


class UsageError(ValueError):
    """A bad argument to the API (or the CLI): an unknown op, strategy, device, template or baseline, a budget that
    does not parse."""



def usage_error(e: Exception) -> UsageError:
    """A pydantic ValidationError as the UsageError one of its validators raised (or as one line naming the field,
    the value and pydantic's reason); a UsageError as itself."""
    from pydantic import ValidationError
    if isinstance(e, UsageError) or not isinstance(e, ValidationError):
        return e if isinstance(e, UsageError) else UsageError(str(e))
    first = e.errors()[0]
    inner = (first.get("ctx") or {}).get("error")
    if isinstance(inner, BaseException):
        return inner if isinstance(inner, UsageError) else UsageError(str(inner))
    where = ".".join(str(p) for p in first["loc"])
    return UsageError(f"{where} {first.get('input')!r}: {first['msg']}")


__all__ = ["UsageError", "usage_error"]
