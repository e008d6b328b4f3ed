#include "sched/task.h"

namespace atl::sched {

const char* task_class_name(TaskClass c) {
  return c == TaskClass::kRealTime ? "rt" : "be";
}

}  // namespace atl::sched
