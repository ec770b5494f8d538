//! What every ABI version binds the same way, written once: the three
//! worlds' bindings, the version's host imports forwarded to the one real
//! implementation in [`crate::imports`], the guest for a
//! component, and the calls into the tool, profile and summarizer exports.
//! A version's own file adds only what differs, as four conversions to and
//! from the version-neutral types: `raw_tool` (a declared tool),
//! `call_context`, `tool_output` and `profile_info`.

/// Bind the ABI version whose WIT is at `$wit`; `$default_cwd` says where a
/// `process` command without `cwd` runs (given the host state).
macro_rules! bind_version {
    ($wit:literal, $version:ident, |$state:ident| $default_cwd:expr) => {
        /// The `tool-plugin` world; also defines the shared `types`,
        /// `process` and `log` interfaces that the other worlds reuse.
        pub mod tool {
            wasmtime::component::bindgen!({
                path: $wit,
                world: "tool-plugin",
                imports: { default: async },
                exports: { default: async },
            });
        }

        /// The `profile-plugin` world.
        pub mod profile {
            wasmtime::component::bindgen!({
                path: $wit,
                world: "profile-plugin",
                imports: { default: async },
                exports: { default: async },
                with: { "sandcrab:plugin/log": super::tool::sandcrab::plugin::log },
            });
        }

        /// The `summarizer-plugin` world.
        pub mod summarizer {
            wasmtime::component::bindgen!({
                path: $wit,
                world: "summarizer-plugin",
                imports: { default: async },
                exports: { default: async },
                with: { "sandcrab:plugin/log": super::tool::sandcrab::plugin::log },
            });
        }

        crate::imports::process::process_host!($version, |$state| $default_cwd);
        crate::imports::log::log_host!($version);

        impl tool::sandcrab::plugin::types::Host for crate::state::HostState {}

        /// This version's host imports.
        pub fn add_to_linker(
            linker: &mut wasmtime::component::Linker<crate::state::HostState>,
        ) -> wasmtime::Result<()> {
            tool::ToolPlugin::add_to_linker::<_, wasmtime::component::HasSelf<_>>(
                linker,
                |state| state,
            )
        }

        /// The guest for a component of this version.
        pub fn guest(
            kind: crate::manifest::PluginKind,
            pre: wasmtime::component::InstancePre<crate::state::HostState>,
        ) -> wasmtime::Result<super::Guest> {
            use crate::manifest::PluginKind;
            Ok(match kind {
                PluginKind::Tool => {
                    super::Guest::Tool(std::sync::Arc::new(tool::ToolPluginPre::new(pre)?))
                }
                PluginKind::Profile => {
                    super::Guest::Profile(Box::new(profile::ProfilePluginPre::new(pre)?))
                }
                PluginKind::Summarizer => super::Guest::Summarizer(Box::new(
                    summarizer::SummarizerPluginPre::new(pre)?,
                )),
            })
        }

        #[async_trait::async_trait]
        impl super::ToolGuest for tool::ToolPluginPre<crate::state::HostState> {
            async fn tools(
                &self,
                store: &mut wasmtime::Store<crate::state::HostState>,
            ) -> wasmtime::Result<Vec<super::RawTool>> {
                let instance = self.instantiate_async(&mut *store).await?;
                let specs = instance.sandcrab_plugin_tool().call_tools(store).await?;
                Ok(specs.into_iter().map(raw_tool).collect())
            }

            async fn instantiate(
                &self,
                store: &mut wasmtime::Store<crate::state::HostState>,
            ) -> wasmtime::Result<Box<dyn super::ToolInstance>> {
                Ok(Box::new(self.instantiate_async(&mut *store).await?))
            }
        }

        #[async_trait::async_trait]
        impl super::ToolInstance for tool::ToolPlugin {
            async fn call(
                &self,
                store: &mut wasmtime::Store<crate::state::HostState>,
                name: &str,
                args_json: &str,
                ctx: &super::GuestContext,
            ) -> wasmtime::Result<
                Result<crate::types::ToolOutput, crate::types::ToolFailure>,
            > {
                use crate::types::ToolFailure;
                use tool::sandcrab::plugin::types::ToolError as E;
                let wit_ctx = call_context(ctx);
                let result = self
                    .sandcrab_plugin_tool()
                    .call_call(store, name, args_json, &wit_ctx)
                    .await?;
                Ok(result.map(tool_output).map_err(|e| match e {
                    E::InvalidArguments(m) => ToolFailure::InvalidArguments(m),
                    E::Denied(m) => ToolFailure::Denied(m),
                    E::Failed(m) => ToolFailure::Failed(m),
                }))
            }
        }

        #[async_trait::async_trait]
        impl super::ProfileGuest for profile::ProfilePluginPre<crate::state::HostState> {
            async fn info(
                &self,
                store: &mut wasmtime::Store<crate::state::HostState>,
            ) -> wasmtime::Result<crate::types::ProfileInfo> {
                let instance = self.instantiate_async(&mut *store).await?;
                let info = instance.sandcrab_plugin_profile().call_info(store).await?;
                Ok(profile_info(info))
            }

            async fn base_instructions(
                &self,
                store: &mut wasmtime::Store<crate::state::HostState>,
            ) -> wasmtime::Result<String> {
                let instance = self.instantiate_async(&mut *store).await?;
                instance
                    .sandcrab_plugin_profile()
                    .call_base_instructions(store)
                    .await
            }
        }

        #[async_trait::async_trait]
        impl super::SummarizerGuest
            for summarizer::SummarizerPluginPre<crate::state::HostState>
        {
            async fn render(
                &self,
                store: &mut wasmtime::Store<crate::state::HostState>,
                persona: &str,
                existing_summary: &str,
                messages: &[crate::types::SummaryMessage],
            ) -> wasmtime::Result<String> {
                use summarizer::exports::sandcrab::plugin::summarizer::Message;
                let messages: Vec<Message> = messages
                    .iter()
                    .map(|m| Message {
                        role: m.role.clone(),
                        content: m.content.clone(),
                    })
                    .collect();
                let instance = self.instantiate_async(&mut *store).await?;
                instance
                    .sandcrab_plugin_summarizer()
                    .call_render(store, persona, existing_summary, &messages)
                    .await
            }
        }
    };
}

/// The released ABI versions, newest first: one row each (the variant, the
/// version text, the module that binds it). Adding a version is its file
/// and its row.
macro_rules! versions {
    ($($variant:ident = $text:literal => $module:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// WIT package versions the host loads, newest first.
        pub const SUPPORTED_VERSIONS: &[&str] = &[$($text),+];

        /// A released version of the plugin ABI.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum WitVersion {
            $($variant,)+
        }

        impl WitVersion {
            fn parse(version: &str) -> Option<Self> {
                match version {
                    $($text => Some(WitVersion::$variant),)+
                    _ => None,
                }
            }

            /// The version, as WIT spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(WitVersion::$variant => $text,)+
                }
            }
        }

        impl Guest {
            /// The guest for a component of `version` and `kind`.
            pub fn new(
                version: WitVersion,
                kind: PluginKind,
                pre: InstancePre<HostState>,
            ) -> wasmtime::Result<Guest> {
                match version {
                    $(WitVersion::$variant => $module::guest(kind, pre),)+
                }
            }
        }

        /// Add the host imports of every supported version to `linker`.
        pub fn add_to_linker(
            linker: &mut wasmtime::component::Linker<HostState>,
        ) -> wasmtime::Result<()> {
            $($module::add_to_linker(linker)?;)+
            fs_v0_1_0::add_to_linker(linker)?;
            fs_v0_2_0::add_to_linker(linker)
        }
    };
}
