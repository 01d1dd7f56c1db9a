"""The fork server's last import: it moves every object the server's imports made (torch's,
torch._dynamo's, a command's worker module's) into the collector's permanent generation
(``gc.freeze``), so that in each process forked from the server a garbage collection looks only
at the objects that process made.

They are never garbage, but a full collection in a forked process would otherwise walk all of
them: about 0.2 s of a core each time with torch and torch._dynamo loaded, which ddp's teardown
pays at the end of every training (it collects the wrappers while the group lives), and it
would write into every one of them, copying the pages the processes share with the server. This
is the use the Python documentation gives for it: freeze in the parent, right before it forks.

Imported only by the fork server (``forking.context`` lists it last in the server's preload);
nothing else imports it.
"""

import gc

gc.freeze()
gc.enable()  # off since the server's first import (unfrozen.py)
