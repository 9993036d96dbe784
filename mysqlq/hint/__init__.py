"""The has-task hint: producers wake idle workers after a commit, on this host and across hosts.

On the producer's host, through unix datagram sockets in a shared directory (:mod:`.local`); on
other hosts, through signed UDP datagrams to the address each worker records in the registry
(:mod:`.wire`, :mod:`.directory`). A hint carries no job data, only a queue name and a due delay; a
lost one only means the job waits for the worker's next poll. See the README's "has-task hint".
"""

from __future__ import annotations

from mysqlq.hint.listener import Listener, Wake
from mysqlq.hint.local import RUN_DIR, hint_dir
from mysqlq.hint.sender import Sender, notify
from mysqlq.hint.wire import ANY_QUEUE, POLL_NOW, Hint

__all__ = ["ANY_QUEUE", "POLL_NOW", "RUN_DIR", "Hint", "Listener", "Sender", "Wake", "hint_dir", "notify"]
