#include "woolly.h"

const char *woolly_version(void) { return "0.1.0"; }
