from pkg.c import step as step_c


def step():
    step_c()
