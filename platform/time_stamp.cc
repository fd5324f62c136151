#include "platform/time_stamp.h"

__thread bool strata_t_tsc_forbidden __attribute__((tls_model("initial-exec"))) = false;
