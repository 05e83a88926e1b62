// Anchors the precompiled LibTorch headers shared by every framegate target.
