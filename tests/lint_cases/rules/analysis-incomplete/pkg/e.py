from pkg.f import step as step_f


def step():
    step_f()
