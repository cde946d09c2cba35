"""The shipped configuration tree: data files only, no code.

``models/`` (model registries), ``recipes/``, ``conditions/`` (condition maps) and ``judges/``
(judges' prompts) ship inside the wheel as package data; a source checkout reads the same files.
Code never opens them by path: ``engine.config_tree.config_dir()`` locates the tree (this
package, or ``$AUDIT_CONFIG_DIR``).
"""
