from pkg.b import step as step_b


def setup_distributed():
    step_b()
