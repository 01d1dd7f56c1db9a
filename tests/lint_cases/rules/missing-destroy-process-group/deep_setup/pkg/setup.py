from pkg.dist.backends import _init_dist_pytorch


def init_dist(launcher):
    if launcher == "pytorch":
        _init_dist_pytorch()
    else:
        raise ValueError(launcher)
