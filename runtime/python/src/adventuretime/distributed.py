"""Sets up JAX or torch distributed from the contract (runtime/dist-env.ts), the same on every backend.

JAX gets the coordinator, the process count and id explicitly (no auto-detection); torch gets
``MASTER_ADDR`` and ``MASTER_PORT`` = the coordinator's port + 1 (JAX's coordinator and torch's
TCPStore cannot share a port), ``RANK`` and ``WORLD_SIZE``.
"""

import sys

from .env import RunEnv

JAX = "jax"
TORCH = "torch"


def _split(addr):
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"coordinator address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


def _pick(framework):
    if framework in (JAX, TORCH):
        return framework
    if framework is not None:
        raise ValueError(f"framework {framework!r}: use 'jax' or 'torch'")
    # The one the program already imported; JAX first when it imported both.
    if "jax" in sys.modules:
        return JAX
    if "torch" in sys.modules:
        return TORCH
    raise RuntimeError("init_distributed: import jax or torch first, or pass framework='jax' or 'torch'")


def _init_jax(env):
    import jax

    if env.num_processes <= 1:
        return
    # CPU collectives across processes need gloo (accelerators bring their own; this leaves them be).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    kwargs = {}
    if env.local_process_count > 1 and env.local_device_count > 0:
        first = env.local_process_id * env.local_device_count
        kwargs["local_device_ids"] = list(range(first, first + env.local_device_count))
    jax.distributed.initialize(env.coordinator_address, env.num_processes, env.process_id, **kwargs)


def _init_torch(env, backend):
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if env.num_processes <= 1:
        addr, port = "127.0.0.1", None
    else:
        addr, port = _split(env.coordinator_address)
        port += 1
    if port is None:
        # One process: a group of one on a free loopback port, so code that calls collectives runs.
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    dist.init_process_group(
        backend,
        init_method=f"tcp://{addr}:{port}" if ":" not in addr else f"tcp://[{addr}]:{port}",
        rank=env.process_id,
        world_size=env.num_processes,
    )


def init_distributed(framework=None, *, env=None, torch_backend=None):
    """Initializes ``framework`` ('jax' or 'torch'; default: whichever is imported) for this job.

    JAX with one process: nothing to do. torch: always a process group (of one, for one process),
    gloo on CPU and nccl where CUDA is there, unless ``torch_backend`` says otherwise.
    Returns the framework it set up.
    """
    env = env or RunEnv.from_env()
    framework = _pick(framework)
    if framework == JAX:
        _init_jax(env)
    else:
        _init_torch(env, torch_backend)
    return framework
