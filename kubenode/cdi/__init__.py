"""Reading CDI (Container Device Interface) specs: what a CDI device name asks a container to get.

The device plugins' Allocate may answer CDI device names (`vendor/class=name`); a CRI runtime resolves
them itself, but a process pod's runtime is ours. `registry.load_registry()` reads the spec directories
(/etc/cdi, then /var/run/cdi), `Registry.resolve(names)` merges the edits of the named devices and their
specs, `ContainerEdits.applied()` gives them as a runtime applies them. spec.py parses and checks one
file (JSON or YAML), names.py the names, edits.py the typed edits. Pure: nothing here touches a
container. deviceplugin/cdi.py is the writing side (our CPU plugin's spec); both follow SPEC.md.
"""
