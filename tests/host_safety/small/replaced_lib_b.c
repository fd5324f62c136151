// Plugin B of replaced_library: the same code as plugin A under another name, so that it
// loads at the address A had and b_work sits at a_work's offset.
volatile unsigned long replaced_lib_sink;

__attribute__((noinline)) void b_work(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; ++i) replaced_lib_sink = replaced_lib_sink * 31 + i;
}
