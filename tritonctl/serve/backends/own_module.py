"""What a Python model's code sees of its process where Triton's stub differs from a shared one.

Triton runs each model instance in a stub process of its own, where ``model.py`` is the module
``model`` and ``sys.argv`` is ``['']``. Models rely on both: ``import model`` (or
``unittest.main("model", exit=False)``, which imports it and reads ``sys.argv``) inside
``initialize`` / ``execute``. Here every model shares the server's process, so both are views
that answer according to the model whose code asks: the nearest frame on the stack whose
module globals carry the instance marker (``bls.INSTANCE_GLOBAL``) decides, which covers code
the model calls (unittest) and threads it starts. Everyone else sees the module ``model`` as
missing and ``sys.argv`` unchanged.
"""

from __future__ import annotations

import sys
import threading
import types

from tritonctl.serve.backends.bls import INSTANCE_GLOBAL

MODULE_NAME = "model"
_install_lock = threading.Lock()


def calling_model_module() -> types.ModuleType | None:
    """The module of the Python model whose code is on the calling stack, if any."""
    frame = sys._getframe(1)
    while frame is not None:
        module_globals = frame.f_globals
        if INSTANCE_GLOBAL in module_globals:
            return sys.modules.get(module_globals.get("__name__", ""))
        frame = frame.f_back
    return None


class OwnModelModule(types.ModuleType):
    """``sys.modules['model']``: the calling model's own module, attribute by attribute."""

    def __getattribute__(self, name: str):
        target = calling_model_module()
        if target is None:
            if name in ("__name__", "__class__", "__dict__", "__spec__", "__loader__", "__path__", "__file__"):
                return types.ModuleType.__getattribute__(self, name)
            raise AttributeError(f"module 'model' is a Python model's own model.py, and only that model's code "
                                 f"(initialize, execute, threads they start) can use it; no '{name}' here")
        return getattr(target, name)

    def __setattr__(self, name: str, value) -> None:
        target = calling_model_module()
        if target is None:
            raise AttributeError("module 'model' can only be changed by a Python model's own code")
        setattr(target, name, value)

    def __dir__(self) -> list[str]:
        target = calling_model_module()
        return dir(target) if target is not None else []


class ModelArgv(list):
    """``sys.argv``: ``['']`` to a Python model's code, as in Triton's stub; the real one else."""

    def _view(self) -> list:
        return [""] if calling_model_module() is not None else list.__getitem__(self, slice(None))

    def __getitem__(self, index):
        return self._view()[index]

    def __len__(self) -> int:
        return len(self._view())

    def __iter__(self):
        return iter(self._view())

    def __contains__(self, item) -> bool:
        return item in self._view()

    def __eq__(self, other) -> bool:
        return self._view() == other

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._view())


def install() -> None:
    """Put both views in place (once per process), unless a real module ``model`` is loaded."""
    with _install_lock:
        if not isinstance(sys.modules.get(MODULE_NAME), OwnModelModule) and MODULE_NAME not in sys.modules:
            view = OwnModelModule(MODULE_NAME, "a Python model's own model.py (see tritonctl.serve.backends.own_module)")
            sys.modules[MODULE_NAME] = view
        if not isinstance(sys.argv, ModelArgv):
            sys.argv = ModelArgv(sys.argv)
