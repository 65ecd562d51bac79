// A shared library without ipu_register_custom_ops: load_custom_ops must refuse it by name.
extern "C" int ipu_some_other_symbol() { return 1; }
