from pkg.e import step as step_e


def step():
    step_e()
