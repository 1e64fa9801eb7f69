"""Lesson 13: `diffattn plan`: a plan for adding differential attention to a real model, computed from its
config.json with lessons 04 and 12's code, every rule beside its evidence (stdlib only: no torch, no PyYAML).

    hfconfig   config.json (or a preset) → Architecture            figures    the plan's numbers
    evidence   what each rule cites; the course's measurements      rules      the decision procedure
    assemble   one plan as a dict (the --json output)               markdown   the same as Markdown
    skill      outputs/skill-diff-attention-integrator.md           command    the subcommand
    families   per model_type: transformers' defaults, which layers slide, experts, what is refused
"""
