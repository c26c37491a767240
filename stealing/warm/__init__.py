"""The warm tree (``dac up``): its folder (file, socket, log, lock), the messages on its
socket, the server that keeps a tree and lends it to one script at a time, and a
script's side of it, which looks to a run like a scheduler of its own."""
