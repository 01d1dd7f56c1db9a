from pkg.d import step as step_d


def step():
    step_d()
