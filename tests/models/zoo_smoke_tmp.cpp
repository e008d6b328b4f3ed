#include <gtest/gtest.h>
#include "models/zoo.h"
TEST(Tmp, Build) { for (auto& m : atl::list_models()) { atl::ModelOptions o; o.init_weights=false; auto g = atl::build_model(m.name, o); printf("%s %ld nodes %zu\n", m.name.c_str(), atl::model_param_count(g), g.nodes().size()); } }
