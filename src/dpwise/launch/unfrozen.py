"""The fork server's first import: the garbage collector off for the server's imports (torch's,
torch._dynamo's, a command's worker module's), which make no garbage; its collections during
them would cost about a fifth of them. ``frozen``, the last import, turns it back on once the
imports' objects are out of its sight, so every forked process starts with it on: the
Python documentation's recipe (off early in the parent, frozen before the fork, on in the child).

Imported only by the fork server (``forking.context`` lists it first in the server's preload);
nothing else imports it.
"""

import gc

gc.disable()
