"""gunicorn settings for hyperbook's web process (bin/serve): uvicorn workers, the app preloaded.

The app, and with it the Korean analyser's model (about 500 MiB) and the KB vocabulary, is loaded
once in the master before the workers fork, so every worker shares those pages instead of loading
its own copy. Per-worker state (database connections, the audit writer and WAL checkpointer
threads, the rate limiter's connections) starts in each worker's lifespan, after the fork.
"""

import ctypes
import gc
import os
import signal
import sys

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_WORKERS", "1"))
worker_class = "hyperbook.web_worker.Worker"  # uvicorn's, with a request read deadline
# Open connections per worker; past this many a request is answered 503 (a flood, not a crowd).
worker_connections = int(os.environ.get("WEB_WORKER_CONNECTIONS", "256"))
preload_app = True
# A worker whose event loop stops answering the master's heartbeat for this long is replaced.
timeout = 60
graceful_timeout = 30
keepalive = 5
accesslog = None
# The client's address comes from the socket: X-Forwarded-For is believed only from these proxies
# (none unless set; gunicorn and uvicorn would otherwise trust any local process).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "")
control_socket_disable = True  # two instances on one host would share $HOME/.gunicorn/…
worker_tmp_dir = os.environ.get("HYPERBOOK_VAR_DIR") or None


def when_ready(server):
    """In the master, after the app is imported and before any worker forks: load what the
    workers share, then leave no database connection open to be inherited."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db import connections

    from kb.answering import warm_up

    try:
        warm_up()
    except ImproperlyConfigured:
        raise  # e.g. a KB reader role that bypasses row-level security: do not start at all
    except Exception:  # a worker warms itself up again; sharing is an optimisation
        server.log.warning("warm-up before fork failed; each worker loads its own", exc_info=True)
    finally:
        connections.close_all()
    gc.collect()
    gc.freeze()  # the shared objects stay out of the workers' collections (and their pages clean)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def post_fork(server, worker):
    """In each new worker: die with the master. A master killed outright (SIGKILL, as the OOM
    killer does) stops no worker, and workers left behind keep serving on the port, so that the
    master supervisor starts again could never bind it."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        # SIGTERM: the worker stops as on a graceful shutdown (in-flight requests answered).
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            server.log.warning("worker %s cannot follow its master's death", worker.pid)
    if os.getppid() != server.pid:  # the master died before the signal was asked for
        os._exit(0)


def child_exit(server, worker):
    """A worker that exits: its metric files stay summed into /metrics (its counts happened),
    but its live gauges are dropped (prometheus_client's multiprocess mode)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
