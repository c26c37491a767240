"""The processes of a tree and their loops: the entry point of every spawned process
(with its monitor), the root, the routers and the leaves, the parent side they share
(children, links, the policy's actions) and the children that come and go; the
interface a leaf needs from a task executor, which ``stealing`` never imports."""
